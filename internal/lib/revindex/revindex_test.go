package revindex_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/vminit/vminit/internal/lib/revindex"
)

func TestSetReplacesAndForgets(t *testing.T) {
	var x revindex.Index
	x.Set("vm-a", "s1", "s2")
	x.Set("vm-b", "s2")
	if got := x.Dependents("s2"); !slices.Equal(got, []string{"vm-a", "vm-b"}) {
		t.Fatalf("s2: %v", got)
	}
	x.Set("vm-a", "s3") // replaces s1 and s2
	if got := x.Dependents("s1"); len(got) != 0 {
		t.Errorf("s1 after vm-a moved: %v", got)
	}
	if got := x.Objects(); !slices.Equal(got, []string{"s2", "s3"}) {
		t.Errorf("objects: %v", got)
	}
	x.Set("vm-b") // forgotten
	x.Set("vm-a")
	if got := x.Objects(); len(got) != 0 {
		t.Errorf("objects after forgetting all: %v", got)
	}
}

func Example() {
	var x revindex.Index
	x.Set("default/vm-1", "default/pw")
	x.Set("default/vm-2", "default/pw", "default/keys")
	fmt.Println(x.Dependents("default/pw"))
	// Output: [default/vm-1 default/vm-2]
}

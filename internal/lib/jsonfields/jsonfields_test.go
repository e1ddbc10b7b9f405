package jsonfields

import (
	"reflect"
	"sort"
	"testing"
	"time"
)

type inner struct {
	A string `json:"a"`
}

type outer struct {
	inner
	Inline inner `json:",inline"`
	B      int   `json:"b,omitempty"`
	Skip   int   `json:"-"`
	NoTag  bool
	//lint:ignore U1000 the unexported field Of must leave out
	private int
	P       *inner `json:"p"`
}

func TestOf(t *testing.T) {
	f, tagged := Of(reflect.TypeFor[outer]())
	var names []string
	for k := range f {
		names = append(names, k)
	}
	sort.Strings(names)
	if !tagged || !reflect.DeepEqual(names, []string{"NoTag", "a", "b", "p"}) || f["p"] != reflect.TypeFor[*inner]() {
		t.Errorf("Of(outer) = %v, %v", f, tagged)
	}
	if _, tagged := Of(reflect.TypeFor[time.Time]()); tagged {
		t.Error("time.Time reported as tagged")
	}
}

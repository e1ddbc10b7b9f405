package httppath_test

import (
	"fmt"

	"github.com/vminit/vminit/internal/lib/httppath"
)

func ExampleIsCanonical() {
	for _, p := range []string{"/latest/meta-data/", "//latest/meta-data/", "/latest/../latest/"} {
		fmt.Println(p, httppath.IsCanonical(p))
	}
	// Output:
	// /latest/meta-data/ true
	// //latest/meta-data/ false
	// /latest/../latest/ false
}

package crd_test

import (
	"fmt"
	"strings"

	"github.com/vminit/vminit/deploy/kubernetes/crd"
)

// The manifest `kubectl apply -k deploy/kubernetes` applies.
func Example() {
	fmt.Println(strings.Contains(string(crd.Instances), "name: instances.vminit.dev"))
	// Output: true
}

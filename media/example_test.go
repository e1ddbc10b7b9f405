package media_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"time"

	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// A NoCloud seed written as an ISO9660 image, and read back as a guest's
// kernel would see it.
func Example() {
	inst, err := spec.Parse([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: dev}\n"), "")
	if err != nil {
		panic(err)
	}
	s, err := seed.Build(inst, seed.NoCloud, seed.Options{})
	if err != nil {
		panic(err)
	}
	var img bytes.Buffer
	// One timestamp for the whole image (callers pass SOURCE_DATE_EPOCH):
	// the same seed gives the same bytes.
	if err := media.Write(&img, s, media.ISO9660, media.Options{ModTime: time.Unix(1700000000, 0)}); err != nil {
		panic(err)
	}
	back, err := media.Open(bytes.NewReader(img.Bytes()), int64(img.Len()))
	if err != nil {
		panic(err)
	}
	fmt.Println(back.Format, back.Label, img.Len()%4096 == 0)
	md, _ := fs.ReadFile(back.FS, "meta-data")
	fmt.Print(string(md))
	// Output:
	// iso9660 cidata true
	// instance-id: 245b0679-40e8-5f6e-8d21-4be094324617
	// local-hostname: dev
}

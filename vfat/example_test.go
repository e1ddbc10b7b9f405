package vfat_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"log"
	"strings"
	"time"

	"github.com/vminit/vminit/vfat"
)

// A NoCloud seed: the four files at the root of a volume labelled cidata.
func Example() {
	files := map[string]string{
		"user-data":      "#cloud-config\nhostname: demo\n",
		"meta-data":      "instance-id: demo-01\n",
		"network-config": "version: 2\n",
		"vendor-data":    "",
	}

	var img bytes.Buffer
	w := vfat.NewWriter(&img, vfat.Options{
		Label:   "cidata",
		ModTime: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
	})
	for name, content := range files { // map order does not matter
		if err := w.AddFile(name, int64(len(content)), 0o644, strings.NewReader(content)); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("image bytes:", img.Len())

	// Read it back.
	im, err := vfat.NewReader(bytes.NewReader(img.Bytes()), int64(img.Len()))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(im.Type, im.Label, im.BootLabel)
	entries, _ := fs.ReadDir(im, ".")
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	ud, _ := fs.ReadFile(im, "user-data")
	fmt.Printf("%q\n", ud)
	// Output:
	// image bytes: 131072
	// FAT12 cidata cidata
	// meta-data
	// network-config
	// user-data
	// vendor-data
	// "#cloud-config\nhostname: demo\n"
}

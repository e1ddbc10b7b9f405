package iso9660_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"log"
	"strings"
	"testing/fstest"
	"time"

	"github.com/vminit/vminit/iso9660"
)

// Write a NoCloud seed ("cidata") to memory, then read it back.
func Example() {
	files := []struct{ name, data string }{
		{"user-data", "#cloud-config\nhostname: demo\n"},
		{"meta-data", "instance-id: iid-demo\n"},
		{"network-config", "version: 2\n"},
	}
	var img bytes.Buffer
	w := iso9660.NewWriter(&img, iso9660.Options{
		Label:   "cidata",
		ModTime: time.Unix(1700000000, 0), // e.g. from SOURCE_DATE_EPOCH
	})
	for _, f := range files {
		if err := w.AddFile(f.name, int64(len(f.data)), 0o644, strings.NewReader(f.data)); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("image bytes:", img.Len())

	r, err := iso9660.NewReader(bytes.NewReader(img.Bytes()), int64(img.Len()))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("label:", r.Label, "| Joliet label:", r.JolietLabel, "| Rock Ridge:", r.RockRidge, "| UUID:", r.UUID)
	entries, err := fs.ReadDir(r, ".")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		info, _ := e.Info()
		fmt.Println(info.Mode(), info.Size(), e.Name())
	}
	// Output:
	// image bytes: 69632
	// label: cidata | Joliet label: cidata | Rock Ridge: RRIP_1991A | UUID: 2023-11-14-22-13-20-00
	// -r--r--r-- 22 meta-data
	// -r--r--r-- 11 network-config
	// -r--r--r-- 29 user-data
}

// Build a ConfigDrive ("config-2") from an fs.FS, such as os.DirFS(dir).
func ExampleWriter_AddFS() {
	tree := fstest.MapFS{
		"openstack/latest/meta_data.json": {Data: []byte(`{"uuid": "83679162-1378-4288-a2d4-70e13ec132aa"}`)},
		"openstack/latest/user_data":      {Data: []byte("#cloud-config\n")},
	}
	var img bytes.Buffer
	w := iso9660.NewWriter(&img, iso9660.Options{Label: "config-2"})
	if err := w.AddFS(tree); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	r, err := iso9660.NewReader(bytes.NewReader(img.Bytes()), int64(img.Len()))
	if err != nil {
		log.Fatal(err)
	}
	fs.WalkDir(r, ".", func(p string, d fs.DirEntry, err error) error {
		fmt.Println(p)
		return err
	})
	// Output:
	// .
	// openstack
	// openstack/latest
	// openstack/latest/meta_data.json
	// openstack/latest/user_data
}

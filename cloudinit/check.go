package cloudinit

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// CheckUserData reports why cloud-init would not act on data as user-data
// (or vendor-data), or nil when it would: empty data is fine (there is
// nothing to do); gzip is decompressed first; a MIME message must be UTF-8
// text; a #cloud-config document must be one YAML mapping that cloud-init's
// loader accepts; the other part types cloud-init knows (#!, #include,
// #cloud-boothook, ## template: jinja, #part-handler,
// #cloud-config-archive, #cloud-config-jsonp) are accepted as they are.
// Data of any other kind is ignored by cloud-init, which is reported as
// ErrIgnored.
func CheckUserData(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	data, err := gunzip(data)
	if err != nil {
		return err
	}
	if isMIME(data) {
		if !utf8.Valid(data) {
			return errors.New("a MIME message that is not UTF-8 text; cloud-init fails to decode it")
		}
		return nil
	}
	switch PartType(data) {
	case "":
		if len(data) > 0 && len(trimSpace(data)) == 0 {
			return nil
		}
		return ErrIgnored
	case TypeCloudConfig:
		doc, err := normalize(data)
		if err != nil {
			return fmt.Errorf("#cloud-config %w", err)
		}
		if doc != nil {
			specs, err := extractMergers(doc)
			if err != nil {
				return err
			}
			if _, err := construct(specs); err != nil {
				return err
			}
		}
	}
	return nil
}

// ErrIgnored is CheckUserData's verdict on data of no type cloud-init
// knows: cloud-init 22.4 classifies it text/x-not-multipart, which no
// handler takes, and logs it as unhandled.
var ErrIgnored = errors.New("cloud-init does not recognise this data (it starts with neither #cloud-config, #!, #include nor another known marker, and is not MIME) and ignores it")

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

package cloudbaseinit_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/vminit/vminit/internal/testing/cbitest"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// The tests here hold vminit's Windows output to cloudbase-init 1.1.9's
// own code (cbitest): its ConfigDrive and NoCloud services read the seed
// images vminit builds, and its user-data plugin runs what they carry.

func load(t testing.TB, doc string) *spec.Instance {
	t.Helper()
	inst, err := spec.Parse([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// image builds inst's seed for ds as f (what `vminit build` writes).
func image(t testing.TB, inst *spec.Instance, ds seed.Datasource, f media.Format) (string, *seed.Seed) {
	t.Helper()
	s, err := seed.Build(inst, ds, seed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := media.Write(&b, s, f, media.Options{}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "seed."+string(f))
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, s
}

// TestOracleSeeds: every seed image cloudbase-init reads (ConfigDrive and
// NoCloud, ISO9660 and VFAT) gives its services the spec's identity,
// keys, admin, network and user data, and its user-data plugin writes the
// files, sets the time zone and accounts and runs the commands and the
// user's PowerShell with the executors the spec means.
func TestOracleSeeds(t *testing.T) {
	cbitest.Require(t)
	inst := load(t, cbitest.WinSpec(""))
	for _, tc := range []struct {
		ds   seed.Datasource
		f    media.Format
		mode string
	}{
		{seed.ConfigDrive, media.ISO9660, cbitest.ConfigDriveISO},
		{seed.ConfigDrive, media.VFAT, cbitest.ConfigDriveVFAT},
		{seed.NoCloud, media.ISO9660, cbitest.NoCloudISO},
		{seed.NoCloud, media.VFAT, cbitest.NoCloudVFAT},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			img, s := image(t, inst, tc.ds, tc.f)
			got := cbitest.Read(t, tc.mode, img)
			ud, _ := s.Lookup(tc.ds.UserDataPath())
			cbitest.CheckWin(t, inst, got, ud, cbitest.Want{Admin: tc.ds == seed.ConfigDrive, Network: true})
		})
	}
}

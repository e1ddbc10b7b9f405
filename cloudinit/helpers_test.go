package cloudinit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vminit/vminit/spec"
)

// Test keys, generated once with ssh-keygen; only the public halves exist.
const (
	keyAlice  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIONt2I6iEtv+xHflGoJXSrd2rBDr+0iYXnkjzE2Dueal alice@example.com"
	keyOps    = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGClPAdKZWvfQndmz2tRFw+JMNfVSzOuyotc5XUqX77L ops@example.com"
	keyBob    = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBFTtj9mO7gALRtbL6jwJBZe50440dBDU+/s40/ecarfKh8S4JSSpa1YKEOEkxRpjutvz716n7HuZCzq8YRjZa50= bob@example.com"
	hashAlice = "$6$vminitTestSalt$bxoxYrnKoMYX7SNV.Nxk54vzUsBV9eSOhZtT4XP8XaipbIH8rFb4WkkeVTUwN7ya1I90C069s2n6lDSIK14JS1"
)

// loadSpec writes doc (and files, relative to it) to a temporary directory
// and loads it as the CLI would.
func loadSpec(t testing.TB, doc string, files map[string][]byte) *spec.Instance {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "instance.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	inst, err := spec.Load(p)
	if err != nil {
		t.Fatalf("loading the test spec: %v", err)
	}
	return inst
}

// fullSpec exercises every part of the cloud-config renderer.
const fullSpec = `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: web-1
spec:
  fqdn: web-1.prod.example.com
  timezone: Europe/Berlin
  sshAuthorizedKeys:
    - ` + keyOps + `
  users:
    - name: alice
      gecos: Alice Admin
      groups: [adm, sudo]
      shell: /bin/bash
      sudo: "ALL=(ALL) NOPASSWD:ALL"
      passwordHash: "` + hashAlice + `"
      sshAuthorizedKeys:
        - ` + keyAlice + `
        - ` + keyBob + `
    - name: deploy
      primaryGroup: apps
      system: true
      shell: /usr/sbin/nologin
      homeDir: /srv/app
  files:
    - path: /etc/motd
      content: |
        web-1: managed by vminit.
    - path: /srv/app/env
      mode: "0600"
      owner: deploy:apps
      content: "LISTEN=:8080\n"
    - path: /usr/local/bin/blob
      mode: "0755"
      contentBase64: AAECA/7/
    - path: /etc/crlf.txt
      content: "windows\r\nline\r\n"
    - path: /etc/unicode.txt
      content: "J\u00fcrgen \u2603 tab\there \nno newline at end"
    - path: /etc/spaces.txt
      content: "trailing spaces   \n\n\n"
    - path: /etc/hosts.extra
      append: true
      content: "192.0.2.9 extra\n"
    - path: /etc/leading-newline
      content: "\n\tindented after a blank line\n"
    - path: /etc/folded
      content: "\u2028 line separator\n"
    - path: /etc/empty
    - path: /etc/looks-like-yaml
      content: "yes"
  units:
    - name: app.service
      enabled: true
      content: |
        [Unit]
        Description=Example application
        [Service]
        ExecStart=/usr/bin/python3 -m http.server 8080
        [Install]
        WantedBy=multi-user.target
      dropins:
        - name: 10-env.conf
          content: |
            [Service]
            EnvironmentFile=/srv/app/env
    - name: nginx.service
      dropins:
        - name: 10-restart.conf
          content: |
            [Service]
            Restart=always
    - name: apt-daily.timer
      enabled: false
  mounts:
    - device: LABEL=data
      path: /srv/data
      type: ext4
      options: [defaults, nofail]
    - device: "nas:/export/home"
      path: /home/shared-nfs
      type: nfs
  packages: [nginx, python3]
  bootCommands:
    - [sh, -c, "echo boot > /dev/console"]
  commands:
    - [systemctl, restart, nginx]
    - echo "first boot done on $(hostname)" > /var/log/first-boot.log
    - ["echo", "it's", "a b", "$HOME", "yes", "0644"]
  cloudInit:
    metaData:
      dsmode: local
      tags: {env: prod, "on": "yes"}
      count: 3
      ratio: 0.5
`

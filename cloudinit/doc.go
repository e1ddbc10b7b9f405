// Package cloudinit renders a vminit instance spec into cloud-init's data.
package cloudinit

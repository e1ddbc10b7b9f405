package run

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"
)

// powerdown presses the guest's ACPI power button through QEMU's QMP
// socket (system_powerdown), as a host's shutdown does; a guest that
// handles it powers off cleanly and QEMU exits.
func powerdown(socket string) error { return qmpExecute(socket, "system_powerdown") }

// quit makes QEMU exit at once, as pulling the plug, but with its disk
// images flushed and closed: a kept overlay stays consistent (a killed
// QEMU loses the qcow2 metadata it still caches).
func quit(socket string) error { return qmpExecute(socket, "quit") }

// qmpExecute runs one QMP command without arguments.
func qmpExecute(socket, command string) error {
	conn, err := dialQMP(socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	// The greeting, then capabilities negotiation, then the command.
	if _, err := r.ReadBytes('\n'); err != nil {
		return err
	}
	for _, cmd := range []string{"qmp_capabilities", command} {
		if _, err := fmt.Fprintf(conn, `{"execute":%q}`+"\n", cmd); err != nil {
			return err
		}
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				if cmd == "quit" {
					return nil // QEMU quit before answering
				}
				return err
			}
			var msg struct {
				Return json.RawMessage `json:"return"`
				Error  *struct {
					Desc string `json:"desc"`
				} `json:"error"`
			}
			if json.Unmarshal(line, &msg) != nil {
				continue
			}
			if msg.Error != nil {
				return fmt.Errorf("%s: %s", cmd, msg.Error.Desc)
			}
			if msg.Return != nil {
				break
			}
			// An event ({"event": ...}): read on.
		}
	}
	return nil
}

// hmp runs a human monitor command through QMP (tests use qemu-io).
func hmp(socket, command string) error {
	conn, err := dialQMP(socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(conn)
	if _, err := r.ReadBytes('\n'); err != nil {
		return err
	}
	req, _ := json.Marshal(map[string]any{"execute": "human-monitor-command", "arguments": map[string]string{"command-line": command}})
	for _, msg := range [][]byte{[]byte(`{"execute":"qmp_capabilities"}`), req} {
		if _, err := conn.Write(append(msg, '\n')); err != nil {
			return err
		}
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return err
			}
			var m struct {
				Return json.RawMessage        `json:"return"`
				Error  *struct{ Desc string } `json:"error"`
			}
			if json.Unmarshal(line, &m) != nil {
				continue
			}
			if m.Error != nil {
				return fmt.Errorf("%s: %s", command, m.Error.Desc)
			}
			if m.Return != nil {
				if s := strings.Trim(string(m.Return), `"{}`); strings.Contains(s, "rror") {
					return fmt.Errorf("%s: %s", command, s)
				}
				break
			}
		}
	}
	return nil
}

// dialQMP connects to QEMU's QMP socket, which QEMU creates a moment
// after it starts.
func dialQMP(socket string) (net.Conn, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("unix", socket, 5*time.Second)
		if err == nil || time.Now().After(deadline) {
			return conn, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

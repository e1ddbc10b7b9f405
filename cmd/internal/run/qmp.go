package run

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// powerdown presses the guest's ACPI power button through QEMU's QMP
// socket (system_powerdown), as a host's shutdown does; a guest that
// handles it powers off cleanly and QEMU exits.
func powerdown(socket string) error {
	_, err := qmp(socket, "system_powerdown", nil)
	return err
}

// quit makes QEMU exit at once, as pulling the plug, but with its disk
// images flushed and closed: a kept overlay stays consistent (a killed
// QEMU loses the qcow2 metadata it still caches).
func quit(socket string) error {
	_, err := qmp(socket, "quit", nil)
	if errors.Is(err, io.EOF) {
		return nil // QEMU quit before answering
	}
	return err
}

// hmp runs a human monitor command (tests use qemu-io) and returns what
// it printed.
func hmp(socket, command string) (string, error) {
	ret, err := qmp(socket, "human-monitor-command", map[string]string{"command-line": command})
	if err != nil {
		return "", err
	}
	var out string
	json.Unmarshal(ret, &out)
	return out, nil
}

// qmp runs one QMP command on a new connection: the greeting, the
// capabilities negotiation, then the command; events in between are
// skipped.
func qmp(socket, command string, args any) (json.RawMessage, error) {
	conn, err := dialQMP(socket)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(conn)
	if _, err := r.ReadBytes('\n'); err != nil {
		return nil, err
	}
	var ret json.RawMessage
	for _, c := range []map[string]any{{"execute": "qmp_capabilities"}, {"execute": command, "arguments": args}} {
		if c["arguments"] == nil {
			delete(c, "arguments")
		}
		req, _ := json.Marshal(c)
		if _, err := conn.Write(append(req, '\n')); err != nil {
			return nil, err
		}
		for ret = nil; ret == nil; {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return nil, err
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
				return nil, fmt.Errorf("QMP %s: %s", c["execute"], msg.Error.Desc)
			}
			ret = msg.Return // nil for an event: read on
		}
	}
	return ret, nil
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

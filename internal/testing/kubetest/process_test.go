package kubetest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The helper process: starts a child as Start starts kube-apiserver,
// prints its pid and waits to be killed.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("KUBETEST_HELPER") != "1" {
		t.Skip("helper process of TestChildDiesWithTestBinary")
	}
	p, err := startProcess("/bin/sleep", []string{"120"}, newTailBuffer(1024))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(p.cmd.Process.Pid)
	time.Sleep(2 * time.Minute)
}

// A server process dies with the test binary even when no cleanup runs.
func TestChildDiesWithTestBinary(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), "KUBETEST_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("helper printed %q", line)
	}
	if !alive(pid) {
		t.Fatalf("child %d not running", pid)
	}
	cmd.Process.Kill() // SIGKILL: no cleanup runs
	cmd.Wait()
	for deadline := time.Now().Add(10 * time.Second); alive(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("child %d still running after the test binary was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie waiting for its new parent to
// reap it has stopped running).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestTailBuffer(t *testing.T) {
	w := newTailBuffer(8)
	fmt.Fprint(w, "0123")
	if got := w.String(); got != "0123" {
		t.Errorf("%q", got)
	}
	for i := 0; i < 10; i++ {
		fmt.Fprint(w, "abcdefgh"[i%8:i%8+1])
	}
	if got := w.String(); got != "[...]\n"+"cdefghab" {
		t.Errorf("%q", got)
	}
}

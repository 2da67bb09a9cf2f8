//go:build linux

package worker_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A fault-ledger worker process that gets SIGTERM while it is still
// opening its queue (one restarted after a SIGKILL moments before the run
// ended) has claimed nothing: it exits 0, a clean stop. It exited 2, and
// the killed-processes ledger failed on a loaded machine with "worker
// process 2: exit status 2" after "open queue: dbqueue: check tables:
// context canceled". Here the child's server accepts the connection and
// never answers, so the signal always lands inside Open.
func TestFaultChildStoppedWhileOpeningExitsCleanly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		"DBQUEUE_CHILD="+faultChild,
		"DBQUEUE_CHILD_DSN=postgres://postgres@"+ln.Addr().String()+"/test?sslmode=disable",
		"DBQUEUE_CHILD_RETRY_AFTER=90",
		"DBQUEUE_CHILD_LOG="+filepath.Join(dir, "worker.log"),
		"DBQUEUE_CHILD_RUNS="+filepath.Join(dir, "runs.txt"))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case c := <-accepted: // the child is inside dbqueue.Open, waiting on the server
		defer c.Close()
	case err := <-exited:
		t.Fatalf("the child exited before it connected: %v", err)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child did not connect within 30s")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("stopped while opening its queue, the child exited with %v; want a clean stop (0)", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child did not stop within 30s of SIGTERM")
	}
}

package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// TestHelloRunsAsTheReadmeShowsIt runs the program in an empty directory
// twice (a second run finds its tables and works its own job) and checks
// that README.md shows this very file, so the README's first program is
// one that runs.
func TestHelloRunsAsTheReadmeShowsIt(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// The README shows the program from its package clause on.
	program := string(src[bytes.Index(src, []byte("package main")):])
	if !strings.Contains(string(readme), "```go\n"+program+"```\n") {
		t.Errorf("README.md does not show examples/hello/main.go as it is (from its package clause on); copy it there")
	}

	t.Chdir(t.TempDir())
	for run := 1; run <= 2; run++ {
		if got, want := captureStdout(t, main), "welcome mail to ada@example.com\n"; got != want {
			t.Errorf("run %d printed %q, want %q", run, got, want)
		}
	}
}

func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	f()
	os.Stdout = stdout
	w.Close()
	return <-done
}

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestQuickstartAccountsForEveryJob(t *testing.T) {
	var out bytes.Buffer
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	if err := run(context.Background(), dsn, 500, 8, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"succeeded   490", "failed      10", "left        0 in jobs", "sms: invalid phone number", "nothing lost"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// Command modproxy writes one module version into a file-based module
// proxy (GOPROXY=file://DIR), in the layout the go command reads:
// DIR/<module>/@v/list, <version>.info, <version>.mod and <version>.zip.
// .ci/check-install uses it to install dbqueue's commands as an outside
// user would, from a tree that is not published yet.
//
//	go run . -src /path/to/tree -module github.com/dbqueue/dbqueue -version v0.0.0-20260101000000-abcdef123456 -out /tmp/proxy
//
// It is its own module so that golang.org/x/mod stays out of dbqueue's
// go.mod. The zip is made by golang.org/x/mod/zip, as the go command makes
// it: nested modules, vendor directories and files the go command would
// refuse are left out or reported.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func main() {
	src := flag.String("src", ".", "the module's root directory")
	path := flag.String("module", "", "the module path")
	version := flag.String("version", "", "the version to publish, e.g. v0.0.0-20260101000000-abcdef123456")
	out := flag.String("out", "", "the proxy directory")
	flag.Parse()
	if err := run(*src, *path, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(src, path, version, out string) error {
	if path == "" || version == "" || out == "" {
		return errors.New("pass -module, -version and -out")
	}
	mv := module.Version{Path: path, Version: version}
	if err := module.Check(path, version); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return fmt.Errorf("read the module's go.mod: %w", err)
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(dir, escVersion)

	zf, err := os.Create(base + ".zip")
	if err != nil {
		return err
	}
	if err := modzip.CreateFromDir(zf, mv, src); err != nil {
		zf.Close()
		return fmt.Errorf("zip %s: %w", src, err)
	}
	if err := zf.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(base+".mod", gomod, 0o644); err != nil {
		return err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err := os.WriteFile(base+".info", info, 0o644); err != nil {
		return err
	}
	// list: every version the proxy holds, one a line.
	listFile := filepath.Join(dir, "list")
	old, _ := os.ReadFile(listFile)
	versions := strings.Fields(string(old))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	return os.WriteFile(listFile, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

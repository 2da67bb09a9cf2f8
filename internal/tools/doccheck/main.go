// Command doccheck checks the Markdown docs of the repository: every
// relative link leads to a file that exists, every #anchor to a heading
// of its target (GitHub's anchors), every ```go block builds, or matches
// the Example or program it mirrors, every guide in docs/ has a table of
// contents linking each section, and every table of measured numbers has
// its caption (the command that made it, the date, the machine, the
// load). The rules are in CONTRIBUTING.md, "Go code in the docs". CI runs
// it from .ci/run:
//
//	go run ./internal/tools/doccheck
//
// It prints one line per fault, file:line first, and exits 1 when there
// is any.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

func main() {
	root := flag.String("root", ".", "the repository's root: the module whose packages the blocks use")
	flag.Parse()
	errs, err := check(*root, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(2)
	}
	for _, e := range errs {
		fmt.Println(e)
	}
	if len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "doccheck: %d faults\n", len(errs))
		os.Exit(1)
	}
}

// check checks files (README.md, CONTRIBUTING.md, docs/*.md and docs/*/*.md under root
// when none are given).
func check(root string, files []string) ([]string, error) {
	if len(files) == 0 {
		docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
		measured, _ := filepath.Glob(filepath.Join(root, "docs", "*", "*.md"))
		docs = append(docs, measured...)
		files = append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md")}, docs...)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	byPath := map[string]*doc{}
	var (
		docs []*doc
		errs []string
	)
	for _, f := range files {
		d, err := readDoc(f)
		if os.IsNotExist(err) && filepath.Base(f) == "CONTRIBUTING.md" {
			continue
		}
		if err != nil {
			return nil, err
		}
		byPath[filepath.Clean(f)] = d
		docs = append(docs, d)
	}
	for _, d := range docs {
		errs = append(errs, checkLinks(d, byPath)...)
		errs = append(errs, checkContents(d)...)
		errs = append(errs, checkCaptions(d)...)
	}
	blockErrs, err := checkBlocks(abs, docs)
	if err != nil {
		return nil, err
	}
	errs = append(errs, blockErrs...)
	sort.Strings(errs)
	return errs, nil
}

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// doc is one Markdown file, read into what the checks need.
type doc struct {
	path  string // as given, for messages
	lines []string
	// anchors are the fragment names its headings and <a name|id>
	// elements define.
	anchors map[string]bool
	links   []link
	blocks  []block
}

// link is one link written in a document, outside code.
type link struct {
	line   int // 1-based
	target string
}

// block is one fenced code block.
type block struct {
	line int    // 1-based line of the opening fence
	lang string // the fence's info string, first word
	code string
	// marker is the doccheck directive of the HTML comment right above
	// the fence, without "doccheck:" ("" when there is none).
	marker string
}

var (
	fence = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([^\\s`]*)")
	// heading is an ATX heading; setext headings are not used here.
	heading = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	// inlineLink finds [text](target) and ![alt](target), target up to a
	// space (a title may follow) or the closing parenthesis.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^\s)>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	htmlHref   = regexp.MustCompile(`\s(?:href|src)="([^"]+)"`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	marker     = regexp.MustCompile(`^\s*<!--\s*doccheck:\s*(.*?)\s*-->\s*$`)
)

func readDoc(path string) (*doc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseDoc(path, string(b)), nil
}

func parseDoc(path, text string) *doc {
	d := &doc{path: path, lines: strings.Split(text, "\n"), anchors: map[string]bool{}}
	seen := map[string]int{}
	var (
		open     *block
		openMark string
		code     []string
	)
	for i, line := range d.lines {
		if open != nil {
			if t := strings.TrimSpace(line); strings.HasPrefix(t, openMark) && strings.Trim(t, openMark[:1]) == "" {
				open.code = strings.Join(code, "\n")
				d.blocks = append(d.blocks, *open)
				open = nil
			} else {
				code = append(code, line)
			}
			continue
		}
		if m := fence.FindStringSubmatch(line); m != nil {
			open = &block{line: i + 1, lang: m[2]}
			if i > 0 {
				if mm := marker.FindStringSubmatch(d.lines[i-1]); mm != nil {
					open.marker = mm[1]
				}
			}
			openMark, code = m[1], nil
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			s := slug(m[1])
			if n := seen[s]; n > 0 {
				d.anchors[fmt.Sprintf("%s-%d", s, n)] = true
			} else {
				d.anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		prose := codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(prose, -1) {
			d.links = append(d.links, link{i + 1, m[1]})
		}
		if m := refDef.FindStringSubmatch(prose); m != nil {
			d.links = append(d.links, link{i + 1, m[1]})
		}
		for _, m := range htmlHref.FindAllStringSubmatch(prose, -1) {
			d.links = append(d.links, link{i + 1, m[1]})
		}
	}
	return d
}

// slug is GitHub's anchor for a heading: the text as rendered (links
// and code marks dropped) in lower case, with every character that is not
// a letter, digit, space, hyphen or underscore removed and each space
// made a hyphen.
func slug(h string) string {
	h = inlineLink.ReplaceAllStringFunc(h, func(s string) string {
		return s[strings.Index(s, "[")+1 : strings.Index(s, "]")]
	})
	h = regexp.MustCompile(`<[^>]+>`).ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLinks reports every relative link of d whose file is missing, and
// every #fragment that no heading of its target defines. docs holds the
// Markdown files already read, by clean path.
func checkLinks(d *doc, docs map[string]*doc) []string {
	var errs []string
	for _, l := range d.links {
		t := l.target
		if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") || strings.HasPrefix(t, "//") {
			continue
		}
		file, frag, _ := strings.Cut(t, "#")
		target := filepath.Clean(d.path)
		if file != "" {
			target = filepath.Join(filepath.Dir(d.path), file)
			if _, err := os.Stat(target); err != nil {
				errs = append(errs, fmt.Sprintf("%s:%d: link to %s: no such file", d.path, l.line, t))
				continue
			}
		}
		if frag == "" || !strings.HasSuffix(target, ".md") {
			continue
		}
		td, ok := docs[target]
		if !ok {
			var err error
			if td, err = readDoc(target); err != nil {
				errs = append(errs, fmt.Sprintf("%s:%d: link to %s: %v", d.path, l.line, t, err))
				continue
			}
			docs[target] = td
		}
		if !td.anchors[strings.ToLower(frag)] {
			errs = append(errs, fmt.Sprintf("%s:%d: link to %s: %s has no heading with the anchor #%s", d.path, l.line, t, target, frag))
		}
	}
	return errs
}

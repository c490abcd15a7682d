// Package golden is the one switch that rewrites files generated from code:
// the report's golden summaries, the lab's golden verdicts and the tables in
// docs/ that a catalogue writes. UPDATE=1 on `go test` rewrites them all;
// without it a test compares and names the command. It does not import
// testing, so the floor's own tests (internal/reqs) can use it.
package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Env is the variable that turns comparing into rewriting.
const Env = "UPDATE"

// Updating says whether this run rewrites generated files.
func Updating() bool { return os.Getenv(Env) == "1" }

// Hint is the command that rewrites the generated files of package pkg
// (as `go test` names it, e.g. "./report").
func Hint(pkg string) string { return Env + "=1 go test " + pkg }

// File returns the content a test should compare got against: the file at
// path, or, when Updating, got itself after writing it there.
func File(path string, got []byte) ([]byte, error) {
	if Updating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		return got, os.WriteFile(path, got, 0o644)
	}
	return os.ReadFile(path)
}

// Section compares the text between the markers begin and end in the file
// at path with body. It returns what the file holds there and what it
// should hold; when Updating it rewrites the file so the two agree.
func Section(path, begin, end, body string) (have, want string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	s := string(b)
	i := strings.Index(s, begin)
	j := strings.Index(s, end)
	if i < 0 || j < i+len(begin) {
		return "", "", fmt.Errorf("%s lacks the markers %q ... %q", path, begin, end)
	}
	have = s[i+len(begin) : j]
	if Updating() && have != body {
		if err := os.WriteFile(path, []byte(s[:i+len(begin)]+body+s[j:]), 0o644); err != nil {
			return "", "", err
		}
		have = body
	}
	return have, body, nil
}

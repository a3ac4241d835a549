package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelp: every command's --help (and -h, and `s3gate help <command>`)
// goes to stdout with exit 0, says what the command does and lists its own
// flags, first; version prints the version; a misuse goes to stderr with
// exit 2.
func TestHelp(t *testing.T) {
	tests := []struct {
		args    []string
		purpose string
		flags   []string // in this order, before the shared settings
	}{
		{[]string{"serve"}, "Serves the S3 API", []string{"Storage:", "-database-url", "-data-dir", "Listening:", "-addr", "Online GC:", "-gc-grace", "Logs and metrics:", "-log-level"}},
		{[]string{"migrate"}, "Applies the PostgreSQL schema migrations", []string{"Flags:", "-database-url", "Settings shared with serve:", "-addr"}},
		{[]string{"admin"}, "Manages the access keys", []string{"admin key create", "admin key list", "admin key delete"}},
		{[]string{"admin", "key"}, "Manages the access keys", []string{"admin key create"}},
		{[]string{"admin", "key", "create"}, "Creates an access key", []string{"Flags:", "-access-key", "-buckets", "-read-only", "-secret", "-database-url", "Settings shared with serve:", "-addr"}},
		{[]string{"admin", "key", "list"}, "Lists the access keys", []string{"Flags:", "-database-url", "-data-dir", "Settings shared with serve:"}},
		{[]string{"admin", "key", "delete"}, "Deletes the access key ID", []string{"Flags:", "-database-url", "Settings shared with serve:"}},
		{[]string{"gc"}, "Reclaims content that nothing references", []string{"Flags:", "-dry-run", "-gc-grace", "-offline", "-stage-grace", "-upload-expiry", "-database-url", "Settings shared with serve:", "-addr"}},
		{[]string{"fsck"}, "Checks the store", []string{"Flags:", "-database-url", "-data-dir", "Settings shared with serve:", "-addr"}},
		{[]string{"healthcheck"}, "Exits 0 if the gateway", []string{"Flags:", "-metrics-addr"}},
		{[]string{"version"}, "Prints the version", nil},
		{[]string{"help"}, "Shows the list of commands", nil},
	}
	for _, tc := range tests {
		name := strings.Join(tc.args, " ")
		forms := map[string][]string{
			"--help": append(tc.args[:len(tc.args):len(tc.args)], "--help"),
			"-h":     append(tc.args[:len(tc.args):len(tc.args)], "-h"),
			"help":   append([]string{"help"}, tc.args...),
		}
		for form, args := range forms {
			t.Run(name+" "+form, func(t *testing.T) {
				var out, errOut bytes.Buffer
				if code := run(args, &out, &errOut); code != 0 || errOut.Len() > 0 {
					t.Fatalf("exit %d, stderr %q", code, errOut.String())
				}
				text := out.String()
				if !strings.Contains(text, tc.purpose) || !strings.Contains(text, "usage: s3gate") {
					t.Errorf("no usage line or purpose %q:\n%s", tc.purpose, text)
				}
				if strings.Contains(text, "Usage of") {
					t.Errorf("Go's bare flag listing:\n%s", text)
				}
				rest := text
				for _, f := range tc.flags {
					i := strings.Index(rest, "\n  "+f)
					if strings.HasSuffix(f, ":") || strings.HasPrefix(f, "admin") {
						i = strings.Index(rest, f)
					}
					if i < 0 {
						t.Fatalf("%q missing or out of order (want %q):\n%s", f, tc.flags, text)
					}
					rest = rest[i+len(f):]
				}
				for _, f := range []string{"-gc-grace", "-upload-expiry", "-database-url", "-addr"} {
					if n := strings.Count(text, "\n  "+f+" "); n > 1 {
						t.Errorf("%s listed %d times:\n%s", f, n, text)
					}
				}
			})
		}
	}
}

func TestTopLevel(t *testing.T) {
	tests := []struct {
		args    []string
		code    int
		stdout  string
		stderr  string
		outOnly bool
	}{
		{args: []string{"help"}, stdout: "Commands:\n  serve"},
		{args: []string{"--help"}, stdout: "Commands:\n  serve"},
		{args: []string{"-h"}, stdout: "Commands:\n  serve"},
		{args: []string{"version"}, stdout: "s3gate " + version + "\n"},
		{args: []string{"--version"}, stdout: "s3gate " + version + "\n"},
		{args: nil, code: 2, stderr: "Commands:"},
		{args: []string{"bogus"}, code: 2, stderr: `unknown command "bogus"`},
		{args: []string{"help", "bogus"}, code: 2, stderr: `unknown command "bogus"`},
		{args: []string{"version", "extra"}, code: 2, stderr: "unexpected argument"},
		{args: []string{"admin", "rotate"}, code: 2, stderr: `unknown command "rotate"`},
		{args: []string{"admin", "key", "rotate"}, code: 2, stderr: `unknown command "rotate"`},
		{args: []string{"gc", "--bogus"}, code: 2, stderr: "bogus"},
		{args: []string{"gc", "--grace=0"}, code: 2, stderr: "-grace 0: give a positive age"},
		{args: []string{"fsck", "--bogus"}, code: 2, stderr: "bogus"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tc.args, &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", code, tc.code, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errOut.String(), tc.stderr) {
				t.Fatalf("stdout %q, stderr %q; want %q / %q", out.String(), errOut.String(), tc.stdout, tc.stderr)
			}
			if tc.code == 0 && errOut.Len() > 0 || tc.code != 0 && out.Len() > 0 {
				t.Errorf("help or version on stderr, or a misuse on stdout: stdout %q, stderr %q", out.String(), errOut.String())
			}
		})
	}
}

package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParseAuthFile: a table of auth files, good and bad; each error names
// the entry and the field, and never holds a secret.
func TestParseAuthFile(t *testing.T) {
	const hash = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	good := `{"tokens": [
		{"name": "collector", "secret": "` + hash + `", "roles": ["ingest"], "projects": ["prod", "staging", "prod"]},
		{"name": "grafana", "secret": "plain-secret-0123456789", "roles": ["read", "admin", "read"], "projects": ["*"]}
	]}`
	set, err := parseAuthFile([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(set.tokens) != 2 || set.lookup("test") == nil || set.lookup("test").name != "collector" ||
		set.lookup("plain-secret-0123456789").name != "grafana" || set.lookup("plain-secret-012345678") != nil {
		t.Fatalf("lookup: %+v", set.tokens)
	}
	c, g := set.tokens[0], set.tokens[1]
	if strings.Join(c.projects, ",") != "prod,staging" || !c.allows("prod") || c.allows("dev") || c.soleProject() != "" ||
		!c.has(RoleIngest) || c.has(RoleRead) {
		t.Fatalf("collector: %+v", c)
	}
	if len(g.roles) != 2 || !g.allows("anything") || g.soleProject() != "" {
		t.Fatalf("grafana: %+v", g)
	}

	for _, c := range []struct{ file, want string }{
		{``, "empty"},
		{`{"tokens": []}`, "no tokens"},
		{`{"tokens": [{"name": "a", "secret": "sekrit-sekrit-sekrit", "roles": ["read"], "projects": ["p"]}]} x`, "after the JSON"},
		{`{"tokens": [{"name": "a", "secret": "sekrit-sekrit-sekrit", "roles": ["read"], "projects": ["p"], "extra": 1}]}`, `unknown field "extra"`},
		{`{"tokens": [{"secret": "sekrit-sekrit-sekrit", "roles": ["read"], "projects": ["p"]}]}`, "token 1: name is empty"},
		{`{"tokens": [{"name": "a b", "secret": "sekrit-sekrit-sekrit", "roles": ["read"], "projects": ["p"]}]}`, `name "a b"`},
		{`{"tokens": [{"name": "a", "secret": "sekrit", "roles": ["read"], "projects": ["p"]}]}`, "token 1 (a): secret: a plain secret has at least 16"},
		{`{"tokens": [{"name": "a", "secret": "sekrit sekrit sekrit", "roles": ["read"], "projects": ["p"]}]}`, "no spaces"},
		{`{"tokens": [{"name": "a", "secret": "sha256:abc", "roles": ["read"], "projects": ["p"]}]}`, "64 hex digits"},
		{`{"tokens": [{"name": "a", "secret": "sha256:` + strings.Repeat("zz", 32) + `", "roles": ["read"], "projects": ["p"]}]}`, "64 hex digits"},
		{`{"tokens": [{"name": "a", "secret": "sekrit-sekrit-sekrit", "roles": [], "projects": ["p"]}]}`, "roles is empty"},
		{`{"tokens": [{"name": "a", "secret": "sekrit-sekrit-sekrit", "roles": ["root"], "projects": ["p"]}]}`, `role "root"`},
		{`{"tokens": [{"name": "a", "secret": "sekrit-sekrit-sekrit", "roles": ["read"]}]}`, "projects is empty"},
		{`{"tokens": [{"name": "a", "secret": "sekrit-sekrit-sekrit", "roles": ["read"], "projects": ["*", "p"]}]}`, `list it alone`},
		{`{"tokens": [{"name": "a", "secret": "sekrit-sekrit-sekrit", "roles": ["read"], "projects": ["../p"]}]}`, `project "../p"`},
		{`{"tokens": [{"name": "a", "secret": "sekrit-sekrit-sekrit", "roles": ["read"], "projects": ["p"]},
		              {"name": "a", "secret": "other-secret-sekrit", "roles": ["read"], "projects": ["p"]}]}`, "token 2 (a): the name is used twice"},
		{`{"tokens": [{"name": "a", "secret": "sekrit-sekrit-sekrit", "roles": ["read"], "projects": ["p"]},
		              {"name": "b", "secret": "sekrit-sekrit-sekrit", "roles": ["read"], "projects": ["p"]}]}`, "token 2 (b): the same secret"},
		{`{"tokens": [{"name": "a", "secret": 5, "roles": ["read"], "projects": ["p"]}]}`, "want a string"},
		{`{"tokens": [{"name": "a", "secret": "sekrit-sekrit-sekrit"`, "ends early"},
		{`{"tokens": [{"name": "a", "secret": "sekrit-sekrit-sekrit}`, "ends early"},
		{`{"tokens": [{"name": "a", "secret": "sekrit-sekrit-sekrit" x`, "syntax error at byte"},
	} {
		_, err := parseAuthFile([]byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.file, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "sekrit") {
			t.Errorf("%s: the error holds the secret: %v", c.file, err)
		}
	}
}

// FuzzParseAuthFile: the parser never panics; what it accepts is
// consistent (every token has roles and projects, and is found by its
// secret when the file held it in the clear); its errors never hold a
// secret of the file. Seeds: testdata/fuzz/FuzzParseAuthFile.
func FuzzParseAuthFile(f *testing.F) {
	f.Add([]byte(`{"tokens": [{"name": "a", "secret": "plain-secret-0123456789", "roles": ["read"], "projects": ["p"]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := parseAuthFile(b)
		// The secrets the file holds, as far as JSON can tell.
		var f authFileJSON
		json.Unmarshal(b, &f)
		if err != nil {
			for _, e := range f.Tokens {
				// Shorter strings occur in the messages' own words; a string
				// found elsewhere in the file (a name, a key) may be echoed.
				if len(e.Secret) >= minSecretLen && strings.Count(string(b), e.Secret) == 1 && strings.Contains(err.Error(), e.Secret) {
					t.Fatalf("the error %q holds a secret", err)
				}
			}
			return
		}
		if len(set.tokens) == 0 {
			t.Fatal("accepted a file without tokens")
		}
		for i, tk := range set.tokens {
			if len(tk.roles) == 0 || len(tk.projects) == 0 || tk.name == "" {
				t.Fatalf("token %d accepted incomplete: %+v", i, tk)
			}
			for _, r := range tk.roles {
				if r != RoleIngest && r != RoleRead && r != RoleAdmin {
					t.Fatalf("token %d: role %q accepted", i, r)
				}
			}
			if i < len(f.Tokens) && !strings.HasPrefix(f.Tokens[i].Secret, hashPrefix) {
				if got := set.lookup(f.Tokens[i].Secret); got == nil || got.name != tk.name {
					t.Fatalf("token %d is not found by its secret", i)
				}
			}
		}
	})
}

package server

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// The auth file (--auth-file) lists the tokens a server accepts, as JSON:
//
//	{"tokens": [
//	  {"name": "collector", "secret": "sha256:9f86d0...", "roles": ["ingest"], "projects": ["prod"]},
//	  {"name": "grafana",   "secret": "sha256:2c26b4...", "roles": ["read"],   "projects": ["*"]}
//	]}
//
// name labels the token in logs and error messages (the secret never
// appears in either). secret is the token itself (at least 16 characters),
// or "sha256:" and the 64 hex digits of its SHA-256, so the file need not
// hold usable secrets. roles are any of ingest, read and admin; each grants
// only its own routes (a token that erases and searches lists both admin and
// read). projects are project names, or "*" for every project.
//
// SHA-256 rather than a slow password hash: tokens are random 256-bit
// strings (rastro token makes them), not passwords, so a fast hash resists
// guessing as well as a slow one does, and it costs nothing per request.

// Role is what a token may do.
type Role string

const (
	RoleIngest Role = "ingest" // write spans
	RoleRead   Role = "read"   // query, search, tail, MCP, the metrics
	RoleAdmin  Role = "admin"  // erase, compact, read the erasure log
)

// AnyProject in a token's projects grants every project.
const AnyProject = "*"

// maxAuthFile bounds the auth file's size.
const maxAuthFile = 4 << 20

// minSecretLen is the shortest plain secret the auth file accepts.
const minSecretLen = 16

// hashPrefix marks a hashed secret in the auth file.
const hashPrefix = "sha256:"

// authToken is one token of the auth file, its secret reduced to a hash.
type authToken struct {
	name     string
	hash     [sha256.Size]byte
	roles    []Role
	projects []string // AnyProject alone, or project names, sorted
}

// has reports whether the token holds role.
func (t *authToken) has(role Role) bool { return slices.Contains(t.roles, role) }

// allows reports whether the token may use project.
func (t *authToken) allows(project string) bool {
	return t.projects[0] == AnyProject || slices.Contains(t.projects, project)
}

// soleProject is the token's project when it is bound to exactly one, else "".
func (t *authToken) soleProject() string {
	if len(t.projects) == 1 && t.projects[0] != AnyProject {
		return t.projects[0]
	}
	return ""
}

// authSet is the parsed auth file. It is immutable: a reload builds a new one.
type authSet struct {
	tokens []authToken
}

// lookup returns the token whose secret is secret, or nil. Every entry is
// compared, each in constant time, so the answer's timing does not depend
// on which entry (if any) matched.
func (a *authSet) lookup(secret string) *authToken {
	h := sha256.Sum256([]byte(secret))
	var found *authToken
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(h[:], a.tokens[i].hash[:]) == 1 {
			found = &a.tokens[i]
		}
	}
	return found
}

// authFileJSON is the auth file's shape.
type authFileJSON struct {
	Tokens []authTokenJSON `json:"tokens"`
}

type authTokenJSON struct {
	Name     string   `json:"name"`
	Secret   string   `json:"secret"`
	Roles    []Role   `json:"roles"`
	Projects []string `json:"projects"`
}

// loadAuthFile reads and parses the auth file at path.
func loadAuthFile(path string) (*authSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAuthFile+1))
	if err != nil {
		return nil, fmt.Errorf("auth file %s: %w", path, err)
	}
	if len(b) > maxAuthFile {
		return nil, fmt.Errorf("auth file %s: larger than %d bytes", path, maxAuthFile)
	}
	set, err := parseAuthFile(b)
	if err != nil {
		return nil, fmt.Errorf("auth file %s: %w", path, err)
	}
	return set, nil
}

// parseAuthFile parses an auth file's bytes. Its errors name the entry (by
// position and name) and the field, never a secret.
func parseAuthFile(b []byte) (*authSet, error) {
	var f authFileJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("want JSON {\"tokens\": [{\"name\", \"secret\", \"roles\", \"projects\"}, ...]}: %s", jsonErrorWithoutValues(err))
	}
	if dec.More() {
		return nil, errors.New("unexpected data after the JSON object")
	}
	if len(f.Tokens) == 0 {
		return nil, errors.New("no tokens: list at least one (an auth file that lets no one in is a mistake; remove --auth-file to turn access control off)")
	}
	set := &authSet{tokens: make([]authToken, 0, len(f.Tokens))}
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]bool{}
	for i, e := range f.Tokens {
		where := fmt.Sprintf("token %d", i+1)
		if e.Name == "" {
			return nil, fmt.Errorf("%s: name is empty (it labels the token in logs and errors)", where)
		}
		if !projectRE.MatchString(e.Name) {
			return nil, fmt.Errorf("%s: name %q: use 1-128 letters, digits, '.', '_' or '-'", where, e.Name)
		}
		where += fmt.Sprintf(" (%s)", e.Name)
		if names[e.Name] {
			return nil, fmt.Errorf("%s: the name is used twice", where)
		}
		names[e.Name] = true
		t := authToken{name: e.Name}
		h, err := secretHash(e.Secret)
		if err != nil {
			return nil, fmt.Errorf("%s: secret: %w", where, err)
		}
		if hashes[h] {
			return nil, fmt.Errorf("%s: the same secret as an earlier token", where)
		}
		hashes[h] = true
		t.hash = h
		if len(e.Roles) == 0 {
			return nil, fmt.Errorf("%s: roles is empty: list ingest, read or admin", where)
		}
		for _, r := range e.Roles {
			switch r {
			case RoleIngest, RoleRead, RoleAdmin:
			default:
				return nil, fmt.Errorf("%s: role %q: use ingest, read or admin", where, r)
			}
			if !t.has(r) {
				t.roles = append(t.roles, r)
			}
		}
		if len(e.Projects) == 0 {
			return nil, fmt.Errorf("%s: projects is empty: list project names, or \"*\" for every project", where)
		}
		for _, p := range e.Projects {
			if p == AnyProject {
				if len(e.Projects) > 1 {
					return nil, fmt.Errorf("%s: projects: \"*\" already means every project; list it alone", where)
				}
			} else if !projectRE.MatchString(p) {
				return nil, fmt.Errorf("%s: project %q: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", where, p)
			}
			if !slices.Contains(t.projects, p) {
				t.projects = append(t.projects, p)
			}
		}
		slices.Sort(t.projects)
		set.tokens = append(set.tokens, t)
	}
	return set, nil
}

// secretHash is the SHA-256 of an auth file secret: "sha256:HEX" as
// written, or the hash of a plain secret.
func secretHash(s string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	if hexPart, ok := strings.CutPrefix(s, hashPrefix); ok {
		if len(hexPart) != 2*sha256.Size {
			return h, fmt.Errorf("a hashed secret is %q and %d hex digits", hashPrefix, 2*sha256.Size)
		}
		if _, err := hex.Decode(h[:], []byte(hexPart)); err != nil {
			return h, fmt.Errorf("a hashed secret is %q and %d hex digits", hashPrefix, 2*sha256.Size)
		}
		return h, nil
	}
	if len(s) < minSecretLen {
		return h, fmt.Errorf("a plain secret has at least %d characters (rastro token makes one), or write its hash as %q and 64 hex digits", minSecretLen, hashPrefix)
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return h, errors.New("a secret holds no spaces (clients send it in an HTTP header)")
	}
	return sha256.Sum256([]byte(s)), nil
}

// jsonErrorWithoutValues describes a JSON decoding error without quoting
// the document (a syntax error's message may echo a secret's characters).
func jsonErrorWithoutValues(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %s: want a %s", te.Field, te.Type)
	case errors.Is(err, io.EOF):
		return "the file is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the file ends early"
	}
	// Unknown fields: encoding/json says `json: unknown field "x"`, a key.
	if strings.HasPrefix(err.Error(), "json: unknown field") {
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	return "invalid JSON"
}

// NewToken returns a fresh random token ("rst_" and 43 base64url
// characters: 256 bits) and its hash as the auth file writes it.
func NewToken() (token, hash string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("read random bytes: %w", err)
	}
	token = "rst_" + base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token), nil
}

// HashToken is a token's hash as the auth file writes it: "sha256:" and 64
// hex digits.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hashPrefix + hex.EncodeToString(h[:])
}

// CheckAuthFile parses an auth file's bytes as the server would, and
// returns the error it would give.
func CheckAuthFile(b []byte) error {
	_, err := parseAuthFile(b)
	return err
}

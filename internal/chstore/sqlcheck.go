package chstore

import (
	"fmt"
	"regexp"
	"strings"
)

// The SQL mode's validator (docs/clickhouse.md#sql-mode). A user's
// statement is split into tokens here, checked against a short list of
// what is allowed, and the statement sent to ClickHouse is rebuilt from the
// tokens: comments are dropped (a space stands for them), every string
// literal is written again with its quotes and backslashes escaped the one
// way ClickHouse reads them, and each view name in a table position is
// replaced by a subquery the server writes, filtered on the caller's
// project. What ClickHouse parses is therefore what was checked: nothing
// can hide in a comment or a string, and a literal cannot end early.
//
// Deny by default: a character, a quoted identifier, a table position or a
// keyword the validator does not know is refused, with a message naming it.

// tokKind is the kind of a token.
type tokKind int

const (
	tokIdent  tokKind = iota // a bare identifier or keyword
	tokNumber                // a numeric literal
	tokString                // a string literal; text is its value
	tokPunct                 // an operator or punctuation
)

type token struct {
	kind  tokKind
	text  string // the identifier, number or operator as written; a string's value
	pos   int    // byte offset in the statement
	space bool   // whitespace or a comment came before it
}

// sqlError is a refused statement: what and where.
type sqlError struct{ msg string }

func (e *sqlError) Error() string { return e.msg }

func refuse(format string, args ...any) error {
	return &sqlError{msg: fmt.Sprintf(format, args...)}
}

// The operators the tokenizer knows, longest first.
var sqlOperators = []string{"==", "!=", "<>", "<=", ">=", "||", "->",
	"(", ")", "[", "]", ",", ".", "+", "-", "*", "/", "%", "=", "<", ">", "?", ":", ";"}

var numberRE = regexp.MustCompile(`^(0[xX][0-9a-fA-F]+|[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?)$`)

// tokenize splits a statement into tokens.
func tokenize(sql string) ([]token, error) {
	var out []token
	space := false
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			space = true
			i++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
			space = true
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return nil, refuse("a comment opened at byte %d is not closed", i)
			}
			i += 2 + end + 2
			space = true
		case c == '\'':
			v, n, err := readString(sql[i:])
			if err != nil {
				return nil, refuse("the string at byte %d %v", i, err)
			}
			out = append(out, token{kind: tokString, text: v, pos: i, space: space})
			i += n
			space = false
		case c == '"' || c == '`':
			return nil, refuse("quoted identifiers (%c at byte %d) are not allowed: use bare names", c, i)
		case isIdentStart(c):
			j := i + 1
			for j < len(sql) && isIdentPart(sql[j]) {
				j++
			}
			out = append(out, token{kind: tokIdent, text: sql[i:j], pos: i, space: space})
			i = j
			space = false
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(sql) && (isIdentPart(sql[j]) || sql[j] == '.' ||
				(sql[j] == '+' || sql[j] == '-') && (sql[j-1] == 'e' || sql[j-1] == 'E') && !strings.HasPrefix(strings.ToLower(sql[i:j]), "0x")) {
				j++
			}
			if !numberRE.MatchString(sql[i:j]) {
				return nil, refuse("%q at byte %d is not a number", sql[i:j], i)
			}
			out = append(out, token{kind: tokNumber, text: sql[i:j], pos: i, space: space})
			i = j
			space = false
		default:
			op := ""
			for _, o := range sqlOperators {
				if strings.HasPrefix(sql[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, refuse("the character %q at byte %d is not allowed", rune(c), i)
			}
			out = append(out, token{kind: tokPunct, text: op, pos: i, space: space})
			i += len(op)
			space = false
		}
	}
	return out, nil
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentPart(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' }

// readString reads a single-quoted literal at the start of s as ClickHouse
// does (backslash escapes, ” for a quote) and returns its value and length.
func readString(s string) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 >= len(s) {
				return "", 0, fmt.Errorf("is not closed")
			}
			i++
			switch e := s[i]; e {
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case '0':
				b.WriteByte(0)
			case 'a':
				b.WriteByte('\a')
			case 'v':
				b.WriteByte('\v')
			case 'x':
				if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
					return "", 0, fmt.Errorf("has a bad \\x escape")
				}
				b.WriteByte(unhexByte(s[i+1])<<4 | unhexByte(s[i+2]))
				i += 2
			default:
				b.WriteByte(e)
			}
		case '\'':
			if i+1 < len(s) && s[i+1] == '\'' {
				b.WriteByte('\'')
				i++
				continue
			}
			return b.String(), i + 1, nil
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("is not closed")
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhexByte(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// quoteString writes v as a ClickHouse string literal: quotes and
// backslashes escaped, every other byte as it is.
func quoteString(v string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\'', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// deniedWords are refused wherever they appear (case-insensitive): the
// statements and clauses that write, change settings or write files, the
// system databases, table functions, functions that read a table or a
// dictionary by name, and the names of Rastro's own tables (only the
// views reach them).
var deniedWords = func() map[string]string {
	m := map[string]string{}
	for _, w := range []string{"insert", "alter", "drop", "create", "attach", "detach", "rename", "truncate",
		"optimize", "kill", "set", "settings", "format", "into", "outfile", "system", "grant", "revoke", "use",
		"show", "describe", "exchange", "check", "delete", "update", "information_schema"} {
		m[w] = "the keyword"
	}
	for _, w := range []string{"file", "url", "remote", "remotesecure", "mysql", "jdbc", "odbc", "hdfs", "s3",
		"s3cluster", "input", "cluster", "clusterallreplicas", "merge", "numbers", "numbers_mt", "zeros",
		"generaterandom", "postgresql", "sqlite", "mongodb", "redis", "executable", "dictionary", "view",
		"hudi", "iceberg", "deltalake", "azureblobstorage", "gcs", "values", "loop", "fuzzjson"} {
		m[w] = "the table function"
	}
	for _, w := range []string{"joinget", "joingetornull", "hascolumnintable", "dictget", "dictgetordefault",
		"dictgetornull", "dicthas", "dictisin", "dictgethierarchy", "dictgetstring", "dictgetuint64",
		"dictgetint64", "dictgetfloat64", "dictgetdate", "dictgetdatetime", "dictgetuuid", "dictgetchildren",
		"dictgetdescendants", "modelevaluate", "catboostevaluate", "getmacro", "filesystemavailable",
		"filesystemcapacity", "filesystemfree", "addresstoline", "addresstosymbol", "demangle",
		// in()'s other spellings take a table as their second argument
		"notin", "globalin", "globalnotin", "nullin", "notnullin", "globalnullin", "globalnotnullin",
		"inignoreset", "notinignoreset", "globalinignoreset", "globalnotinignoreset"} {
		m[w] = "the function"
	}
	internal := []string{"trace_index", "erasures", "erased_traces",
		"rollups", "attr_index", "attr_index_span_mv", "attr_index_res_mv", "ops_rollup", "ops_rollup_mv",
		"spans_by_trace", "spans_by_trace_mv", "logs", "log_erasures", "schema_migrations"}
	for _, g := range []llmRollup{llmGen1, llmGen2} {
		internal = append(internal, g.minutes, g.minutes+"_mv", g.hours, g.hours+"_mv")
	}
	for _, w := range internal {
		m[w] = "the internal table"
	}
	return m
}()

// afterTable are the keywords that may follow a table reference; any other
// identifier there is an alias.
var afterTable = map[string]bool{"where": true, "prewhere": true, "group": true, "order": true, "limit": true,
	"having": true, "union": true, "join": true, "left": true, "right": true, "inner": true, "full": true,
	"cross": true, "any": true, "all": true, "asof": true, "semi": true, "anti": true, "outer": true,
	"global": true, "array": true, "on": true, "using": true, "final": true, "sample": true, "with": true,
	"as": true, "paste": true, "window": true, "qualify": true}

// checkSQL validates a statement and rebuilds it with each view reference
// replaced by views[name] (a parenthesized subquery). It refuses what it
// does not allow with a message naming it.
func checkSQL(sql string, views map[string]string) (string, error) {
	toks, err := tokenize(sql)
	if err != nil {
		return "", err
	}
	if n := len(toks); n > 0 && toks[n-1].text == ";" && toks[n-1].kind == tokPunct {
		toks = toks[:n-1]
	}
	if len(toks) == 0 {
		return "", refuse("the statement is empty")
	}
	if first := strings.ToLower(toks[0].text); toks[0].kind != tokIdent || first != "select" && first != "with" {
		return "", refuse("only SELECT (or WITH ... SELECT) is allowed; the statement starts with %q", toks[0].text)
	}
	var out strings.Builder
	emit := func(t token, text string) {
		if t.space && out.Len() > 0 {
			out.WriteByte(' ')
		}
		out.WriteString(text)
	}
	type paren struct{ table bool } // a subquery in a table position
	var stack []paren
	afterTableRef := false // the previous tokens were a table reference (and its alias)
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		lower := strings.ToLower(t.text)
		next := func(k int) *token {
			if i+k < len(toks) {
				return &toks[i+k]
			}
			return nil
		}
		switch t.kind {
		case tokString:
			emit(t, quoteString(t.text))
			afterTableRef = false
			continue
		case tokNumber:
			emit(t, t.text)
			afterTableRef = false
			continue
		case tokPunct:
			switch t.text {
			case ";":
				return "", refuse("only one statement is allowed (a ';' at byte %d is followed by more)", t.pos)
			case ",":
				if afterTableRef {
					return "", refuse("a comma after a table at byte %d: join tables with JOIN", t.pos)
				}
			case "(":
				stack = append(stack, paren{})
			case ")":
				if len(stack) == 0 {
					return "", refuse("a ')' at byte %d closes nothing", t.pos)
				}
				p := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				emit(t, ")")
				afterTableRef = p.table
				if p.table {
					if i, err = alias(toks, i, "", views, &out); err != nil {
						return "", err
					}
				}
				continue
			}
			emit(t, t.text)
			afterTableRef = false
			continue
		}
		// An identifier or keyword.
		if what, ok := deniedWords[lower]; ok {
			return "", refuse("%s %s (at byte %d) is not allowed in the SQL mode", what, strings.ToUpper(t.text), t.pos)
		}
		if strings.HasPrefix(lower, "dict") {
			return "", refuse("the dictionary function %s (at byte %d) is not allowed in the SQL mode", t.text, t.pos)
		}
		if _, ok := views[t.text]; ok {
			if n := next(1); n == nil || n.kind != tokPunct || n.text != "." {
				return "", refuse("the view %s is used at byte %d outside FROM or JOIN", t.text, t.pos)
			}
		}
		afterTableRef = false
		emit(t, t.text)
		switch lower {
		case "from", "join":
			if lower == "join" && i > 0 && strings.EqualFold(toks[i-1].text, "array") {
				continue // ARRAY JOIN takes expressions
			}
			n := next(1)
			if n == nil {
				return "", refuse("%s at byte %d is not followed by a table", strings.ToUpper(t.text), t.pos)
			}
			if n.kind == tokPunct && n.text == "(" {
				if m := next(2); m == nil || m.kind != tokIdent || !strings.EqualFold(m.text, "select") && !strings.EqualFold(m.text, "with") {
					return "", refuse("%s ( at byte %d must open a subquery (SELECT or WITH)", strings.ToUpper(t.text), n.pos)
				}
				emit(*n, "(")
				stack = append(stack, paren{table: true})
				i++
				continue
			}
			sub, ok := views[n.text]
			if what, denied := deniedWords[strings.ToLower(n.text)]; denied && n.kind == tokIdent {
				return "", refuse("%s %s (at byte %d) is not allowed in the SQL mode", what, strings.ToUpper(n.text), n.pos)
			}
			if n.kind != tokIdent || !ok {
				return "", refuse("%s %s (at byte %d): only the views %s can be read", strings.ToUpper(t.text), n.text, n.pos, viewList(views))
			}
			if m := next(2); m != nil && m.kind == tokPunct && (m.text == "." || m.text == "(") {
				return "", refuse("%s %s%s at byte %d: only the views %s can be read, by their bare names", strings.ToUpper(t.text), n.text, m.text, n.pos, viewList(views))
			}
			emit(*n, sub)
			if i, err = alias(toks, i+1, n.text, views, &out); err != nil {
				return "", err
			}
			afterTableRef = true
		case "in":
			n := next(1)
			if n == nil || n.kind != tokPunct || n.text != "(" {
				return "", refuse("IN at byte %d must be followed by a subquery or a list of literals in parentheses", t.pos)
			}
			if m := next(2); m != nil && m.kind == tokIdent && (strings.EqualFold(m.text, "select") || strings.EqualFold(m.text, "with")) {
				continue
			}
			// A list of literals only: IN (db.table) and in(x, table) name tables.
			depth := 0
			for k := i + 1; k < len(toks); k++ {
				u := toks[k]
				if u.kind == tokPunct && (u.text == "(" || u.text == "[") {
					depth++
				} else if u.kind == tokPunct && (u.text == ")" || u.text == "]") {
					depth--
					if depth == 0 {
						break
					}
				} else if u.kind == tokIdent && !literalWord[strings.ToLower(u.text)] ||
					u.kind == tokPunct && u.text != "," && u.text != "-" && u.text != "+" {
					return "", refuse("IN at byte %d takes a subquery or a list of literals; %q at byte %d is neither", t.pos, u.text, u.pos)
				}
			}
		}
	}
	if len(stack) != 0 {
		return "", refuse("a '(' is not closed")
	}
	return out.String(), nil
}

// literalWord are the identifiers a list of literals may hold.
var literalWord = map[string]bool{"null": true, "true": true, "false": true, "inf": true, "nan": true, "tuple": true}

// alias copies the alias after a table reference whose last token is
// toks[i] (AS name, or a bare name that is not a keyword) and returns the
// index of the last token it used. Without one, a view gets its own name
// as alias (view != ""), so that view.column works. An alias may not be a
// denied word or a view's name.
func alias(toks []token, i int, view string, views map[string]string, out *strings.Builder) (int, error) {
	j := i + 1
	if j < len(toks) && toks[j].kind == tokIdent && strings.EqualFold(toks[j].text, "as") {
		j++
		if j >= len(toks) || toks[j].kind != tokIdent {
			return 0, refuse("AS at byte %d is not followed by a name", toks[j-1].pos)
		}
	} else if j >= len(toks) || toks[j].kind != tokIdent || afterTable[strings.ToLower(toks[j].text)] {
		if view != "" {
			out.WriteString(" AS " + view)
		}
		return i, nil
	}
	name := toks[j]
	if what, ok := deniedWords[strings.ToLower(name.text)]; ok {
		return 0, refuse("%s %s (at byte %d) is not allowed in the SQL mode", what, strings.ToUpper(name.text), name.pos)
	}
	if _, ok := views[name.text]; ok {
		return 0, refuse("the view name %s cannot be an alias (at byte %d)", name.text, name.pos)
	}
	for k := i + 1; k <= j; k++ {
		if toks[k].space {
			out.WriteByte(' ')
		}
		out.WriteString(toks[k].text)
	}
	return j, nil
}

func viewList(views map[string]string) string {
	names := make([]string, 0, len(views))
	for _, v := range sqlViewNames {
		if _, ok := views[v]; ok {
			names = append(names, v)
		}
	}
	return strings.Join(names, ", ")
}

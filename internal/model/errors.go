package model

import (
	"strings"
	"unicode/utf8"
)

// ErrorGroup returns what groups an error span with others: its exception
// type (exception.type of the first "exception" event, else the span
// attribute error.type, else "") and its message (the status message, else
// the exception's exception.message) normalised by NormalizeErrorMessage.
func (s *Span) ErrorGroup() (typ, message string) {
	msg := s.StatusMessage
	for i := range s.Events {
		ev := &s.Events[i]
		if ev.Name != "exception" {
			continue
		}
		if v, ok := Lookup(ev.Attributes, "exception.type"); ok {
			typ = v.AsString()
		}
		if msg == "" {
			if v, ok := Lookup(ev.Attributes, "exception.message"); ok {
				msg = v.AsString()
			}
		}
		break
	}
	if typ == "" {
		if v, ok := s.Attr("error.type"); ok {
			typ = v.AsString()
		}
	}
	return truncateUTF8(typ, maxErrTypeBytes), NormalizeErrorMessage(msg)
}

const (
	maxErrTypeBytes      = 200
	MaxErrorMessageBytes = 200
)

// NormalizeErrorMessage turns an error message into its group's name:
// numbers become <n>, identifiers (UUIDs and runs of 8 or more hex digits
// holding a digit) become <id>, whitespace runs become one space, and the
// result is cut to 200 bytes on a character boundary. "timeout after 3012
// ms on 10.0.0.7" and "timeout after 15 ms on 10.0.0.9" share a group.
func NormalizeErrorMessage(s string) string {
	var b strings.Builder
	space := false
	for i := 0; i < len(s) && b.Len() < MaxErrorMessageBytes; {
		c := s[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			space = b.Len() > 0
			i++
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		if isHex(c) && (i == 0 || !isWordByte(s[i-1])) {
			// A token of hex digits, dashes and dots: an id, a number, a
			// version or an address.
			j, digits, letters, dashes := i, 0, 0, 0
			for j < len(s) && (isHex(s[j]) || s[j] == '-' || s[j] == '.' || s[j] == ':') {
				switch {
				case s[j] >= '0' && s[j] <= '9':
					digits++
				case s[j] == '-' || s[j] == '.' || s[j] == ':':
					dashes++
				default:
					letters++
				}
				j++
			}
			for j > i && (s[j-1] == '-' || s[j-1] == '.' || s[j-1] == ':') { // a sentence's full stop
				j--
				dashes--
			}
			switch {
			case digits > 0 && letters == 0: // a number, perhaps with a unit: 30s, 15ms
				b.WriteString("<n>")
				i = j
				continue
			case digits > 0 && digits+letters >= 8 && (j == len(s) || !isWordByte(s[j])):
				b.WriteString("<id>")
				i = j
				continue
			}
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		if b.Len()+n > MaxErrorMessageBytes {
			break
		}
		b.WriteString(s[i : i+n])
		i += n
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isWordByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

// truncateUTF8 cuts s to at most n bytes on a character boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

package approval

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// HTML builds an HTML document from literal markup and escaped values. It
// escapes exactly as html/template does in the contexts agentgate's mails
// and approval pages put values in: element text, RCDATA (<title>, <textarea>)
// and quoted attribute values (Text), and quoted URL attributes such as href
// and action (URL).
//
// The mails and pages are written with it rather than with html/template
// because linking text/template (which html/template is built on) makes the
// Go linker keep every exported method of every type in the binary (the
// template engine calls methods by name), which more than doubled the size
// of the Lambda functions. Tests render the same views with the former
// templates and compare the bytes.
type HTML struct{ b strings.Builder }

// Raw appends trusted markup as it is: only string literals of the program,
// never a value.
func (h *HTML) Raw(markup string) { h.b.WriteString(markup) }

// Text appends s escaped for element text, RCDATA or a quoted attribute
// value: NUL becomes U+FFFD and " & ' + < > become character references.
func (h *HTML) Text(s string) { escapeHTMLOnto(&h.b, s) }

// Int appends n in decimal.
func (h *HTML) Int(n int) { h.b.WriteString(strconv.Itoa(n)) }

// URL appends s as the value of a quoted URL attribute: a URL whose scheme is
// not http, https or mailto becomes "#ZgotmplZ"; bytes that may not appear in
// a URL are percent-encoded (valid escapes are kept); then the result is
// escaped like Text.
func (h *HTML) URL(s string) {
	if !safeURL(s) {
		s = "#ZgotmplZ"
	}
	escapeHTMLOnto(&h.b, normalizeURL(s))
}

// String returns the document.
func (h *HTML) String() string { return h.b.String() }

// escapeHTMLOnto writes s to b with html/template's replacement table.
func escapeHTMLOnto(b *strings.Builder, s string) {
	written := 0
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		var repl string
		switch r {
		case 0:
			repl = "\uFFFD"
		case '"':
			repl = "&#34;"
		case '&':
			repl = "&amp;"
		case '\'':
			repl = "&#39;"
		case '+':
			repl = "&#43;"
		case '<':
			repl = "&lt;"
		case '>':
			repl = "&gt;"
		}
		if repl != "" {
			b.WriteString(s[written:i])
			b.WriteString(repl)
			written = i + w
		}
		i += w
	}
	b.WriteString(s[written:])
}

// safeURL reports whether s has no scheme or an http, https or mailto one.
func safeURL(s string) bool {
	if scheme, _, ok := strings.Cut(s, ":"); ok && !strings.Contains(scheme, "/") {
		return strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https") || strings.EqualFold(scheme, "mailto")
	}
	return true
}

// normalizeURL percent-encodes (in lower-case hex, as html/template does)
// every byte of s but the unreserved and reserved characters of RFC 3986 and
// the % of a valid escape; ' and parentheses are encoded too.
func normalizeURL(s string) string {
	var b strings.Builder
	written := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.IndexByte("!#$&*+,/:;=?@[]-._~", c) >= 0,
			'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			continue
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			continue
		}
		if written == 0 {
			b.Grow(len(s) + 16)
		}
		b.WriteString(s[written:i])
		const hex = "0123456789abcdef"
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
		written = i + 1
	}
	if written == 0 {
		return s
	}
	b.WriteString(s[written:])
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// ETagHeader is the response header of GET /runs/{id} naming the run as
// this caller was sent it (an entity tag, RFC 9110 section 8.8.3).
const ETagHeader = "ETag"

// IfNoneMatchHeader is the request header of GET /runs/{id} listing the
// entity tags the caller has (RFC 9110 section 13.1.2): when one of them is
// the run's as it would be sent now, the answer is 304 Not Modified without
// a body.
const IfNoneMatchHeader = "If-None-Match"

// entityTagBytes is how many bytes of the body's SHA-256 an entity tag
// holds (hex, quoted): 128 bits, far beyond any chance of two bodies a
// caller is sent sharing one.
const entityTagBytes = 16

// entityTag is the strong entity tag of a response body: the first
// entityTagBytes of its SHA-256 in lowercase hex, quoted. It is computed
// from the bytes sent, so it changes whenever they do, whatever changed
// them (the run, the caller's view of it, the encoding), and two callers
// sent the same bytes get the same tag.
func entityTag(body string) string {
	sum := sha256.Sum256([]byte(body))
	return `"` + hex.EncodeToString(sum[:entityTagBytes]) + `"`
}

// conditional adds the entity tag of resp's body to a 200 answer and, when
// the request's If-None-Match matches it, answers 304 Not Modified
// instead: no body, the ETag and the Cache-Control a 200 carries (RFC 9110
// section 15.4.5), nothing that describes a body. Any other answer (an
// error: the caller may not read the run, or it is unknown) is returned
// as it is, with no tag: preconditions are evaluated only for what would
// otherwise be a 200 (RFC 9110 section 13.2.1).
func conditional(req events.APIGatewayProxyRequest, resp events.APIGatewayProxyResponse) events.APIGatewayProxyResponse {
	if resp.StatusCode != http.StatusOK {
		return resp
	}
	tag := entityTag(resp.Body)
	resp.Headers[ETagHeader] = tag
	if !noneMatchFails(ifNoneMatch(req), tag) {
		return resp
	}
	return events.APIGatewayProxyResponse{
		StatusCode: http.StatusNotModified,
		Headers: map[string]string{
			ETagHeader:      tag,
			"Cache-Control": resp.Headers["Cache-Control"],
		},
	}
}

// ifNoneMatch returns the request's If-None-Match field values, in any
// spelling of the name: every value of MultiValueHeaders (API Gateway
// gives each line of a repeated header there) and, when that has none, of
// Headers (a hand-made event, or one that has only the last value). The
// lines of a repeated header are one list (RFC 9110 section 5.3), in any
// order: the list is a set of tags.
func ifNoneMatch(req events.APIGatewayProxyRequest) []string {
	var out []string
	for k, vs := range req.MultiValueHeaders {
		if strings.EqualFold(k, IfNoneMatchHeader) {
			out = append(out, vs...)
		}
	}
	if len(out) > 0 {
		return out
	}
	for k, v := range req.Headers {
		if strings.EqualFold(k, IfNoneMatchHeader) {
			out = append(out, v)
		}
	}
	return out
}

// noneMatchFails reports whether the If-None-Match condition given by
// fields (its field values) is false for the current representation whose
// strong entity tag is current: the field is "*", or lists current (weak
// comparison: W/"x" matches "x"). No field, an empty list and a malformed
// field (one not of the grammar below: an unquoted tag, a lowercase w/, a
// "*" inside a list, a quote or control character in a tag) are not
// matched: the request is answered as if it had no If-None-Match, with the
// whole run, never with a 304 the caller cannot have asked for.
//
//	If-None-Match = "*" / #entity-tag
//	entity-tag    = [ "W/" ] DQUOTE *etagc DQUOTE
//	etagc         = %x21 / %x23-7E / obs-text
func noneMatchFails(fields []string, current string) bool {
	if len(fields) == 0 {
		return false
	}
	list := strings.Join(fields, ",")
	if strings.Trim(list, " \t") == "*" {
		return true
	}
	opaque := strings.Trim(current, `"`)
	matched := false
	for s := list; ; {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return matched
		}
		if s[0] == ',' {
			s = s[1:] // an empty element of the list (RFC 9110 section 5.6.1)
			continue
		}
		tag, rest, ok := cutEntityTag(s)
		if !ok {
			return false // malformed: ignored whole
		}
		matched = matched || tag == opaque
		rest = strings.TrimLeft(rest, " \t")
		if rest != "" && rest[0] != ',' {
			return false
		}
		s = rest
	}
}

// cutEntityTag reads one entity tag at the start of s and returns its
// opaque part without quotes (and without W/: the comparison is weak) and
// what follows it; ok is false when s does not start with one.
func cutEntityTag(s string) (opaque, rest string, ok bool) {
	s = strings.TrimPrefix(s, "W/")
	if s == "" || s[0] != '"' {
		return "", "", false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return s[1:i], s[i+1:], true
		case c < 0x21 || c == 0x7f:
			return "", "", false // space, control characters: not etagc
		}
	}
	return "", "", false // no closing quote
}

package loop

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// The validator's errors are in its own terms: a chain of "validating
// <schema location>: " prefixes, numbers as Go's big.Rat ("11/1") and
// limits printed with %f ("10.000000"), alternatives as "<anonymous
// schema>". schemaMessage puts them in the caller's: where in the schema
// ("at /properties/qty: "), and what the value must be ("must be at most
// 10, not 11"). The patterns follow github.com/google/jsonschema-go's
// messages (validate.go); TestSchemaMessages pins them.
var (
	// locationChain is one or more "validating <location>: " prefixes.
	locationChain = regexp.MustCompile(`(?:validating (\S+): )+`)
	// numberKeyword is a number keyword's failure, with its locations.
	numberKeyword = regexp.MustCompile(`((?:validating \S+: )+)(minimum|maximum|exclusiveMinimum|exclusiveMaximum|multipleOf): (-?[0-9]+/[0-9]+) is (?:not a multiple of|less than or equal to|greater than or equal to|less than|greater than) (-?[0-9.]+)`)
	// alternatives is anyOf's and oneOf's failure to match any.
	alternatives = regexp.MustCompile(`(anyOf|oneOf): did not validate against any of \[[^\]]*\](:;)?`)
	// twoAlternatives is oneOf's failure by matching two.
	twoAlternatives = regexp.MustCompile(`oneOf: validated against both (?:<anonymous schema>|\S+) and (?:<anonymous schema>|\S+)`)
	// missingPointer is a $ref's JSON pointer to nothing (at compile time).
	missingPointer = regexp.MustCompile(`JSON Pointer "([^"]*)": no key "([^"]*)" in map`)
)

// numberRule words a number keyword as what the value must be.
var numberRule = map[string]string{
	"minimum":          "must be at least",
	"maximum":          "must be at most",
	"exclusiveMinimum": "must be greater than",
	"exclusiveMaximum": "must be less than",
	"multipleOf":       "must be a multiple of",
}

// schemaMessage rewrites a validation error message of the schema s.
func schemaMessage(msg string, s *jsonschema.Resolved) string {
	var doc any // s's root as JSON, read when a limit is looked up
	msg = numberKeyword.ReplaceAllStringFunc(msg, func(m string) string {
		sub := numberKeyword.FindStringSubmatch(m)
		chain, keyword, value, printed := sub[1], sub[2], sub[3], sub[4]
		loc := locationChain.FindStringSubmatch(chain)[1]
		if doc == nil && s != nil {
			if b, err := json.Marshal(s.Schema()); err == nil {
				_ = json.Unmarshal(b, &doc)
			}
		}
		limit, ok := schemaNumber(doc, loc, keyword)
		if !ok {
			limit = trimFixed(printed)
		}
		return fmt.Sprintf("validating %s: %s %s, not %s", loc, numberRule[keyword], limit, ratString(value))
	})
	msg = alternatives.ReplaceAllString(msg, "matches none of the ${1} alternatives${2}")
	msg = strings.ReplaceAll(msg, "alternatives:;", "alternatives:")
	msg = twoAlternatives.ReplaceAllString(msg, "matches more than one of the oneOf alternatives")
	return locationChain.ReplaceAllStringFunc(msg, func(m string) string {
		loc := locationChain.FindStringSubmatch(m)[1]
		if loc == "root" {
			return ""
		}
		return "at " + loc + ": "
	})
}

// schemaNumber is the number keyword's value in the schema doc at the
// JSON pointer loc ("root" for doc itself), as the schema writes it.
func schemaNumber(doc any, loc, keyword string) (string, bool) {
	node := doc
	if loc != "root" {
		if !strings.HasPrefix(loc, "/") {
			return "", false // a schema named by its $id
		}
		for _, tok := range strings.Split(loc[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch n := node.(type) {
			case map[string]any:
				node = n[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(n) {
					return "", false
				}
				node = n[i]
			default:
				return "", false
			}
		}
	}
	obj, _ := node.(map[string]any)
	f, ok := obj[keyword].(float64)
	if !ok {
		return "", false
	}
	return strconv.FormatFloat(f, 'g', -1, 64), true
}

// trimFixed drops the zeros %f leaves after the point: "10.000000" is 10.
func trimFixed(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// ratString writes the validator's rational ("11/1", or a float64's exact
// fraction) as the shortest decimal that reads back as the same float64.
func ratString(s string) string {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return s
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// errRemoteRef is what a schema's $ref to anything outside it loads to.
var errRemoteRef = errors.New("remote $ref")

// remoteRefError is a schema's $ref to another document, which is never
// loaded: a tool's schema must be complete in itself.
type remoteRefError struct{ uri string }

func (e *remoteRefError) Error() string {
	return fmt.Sprintf("$ref %q points outside the schema: a remote $ref is not supported (a $ref must stay within the schema, such as \"#/$defs/name\")", e.uri)
}

// refuseRemote is the schema compiler's loader: it loads nothing, and
// records the first URI it was asked for.
func refuseRemote(first **remoteRefError) jsonschema.Loader {
	return func(uri *url.URL) (*jsonschema.Schema, error) {
		if *first == nil {
			*first = &remoteRefError{uri: uri.String()}
		}
		return nil, errRemoteRef
	}
}

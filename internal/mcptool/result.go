package mcptool

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgate/agentgate/internal/loop"
)

// MaxResultBytes caps the text of one remote tool result; a longer result
// is cut at a character boundary and ends with a marker saying so.
const MaxResultBytes = 64 << 10

// truncationMarker ends a result cut at MaxResultBytes.
const truncationMarker = "\n… [result truncated by agentgate: %d of %d bytes kept]"

// resultOf turns an MCP tool result into the model's tool result: text
// blocks as they are, structured content as JSON (when no text carries it
// already), images, audio and resources as a short summary; isError stays.
func resultOf(r *mcp.CallToolResult) loop.Result {
	var parts []string
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes, not shown]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes, not shown]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s%s%s]", c.URI, label(" name ", c.Name), label(", ", c.MIMEType)))
		case *mcp.EmbeddedResource:
			parts = append(parts, embedded(c.Resource))
		default:
			parts = append(parts, "[content of an unsupported kind, not shown]")
		}
	}
	if r.StructuredContent != nil {
		if b, err := loop.MarshalJSON(r.StructuredContent); err == nil && !containsJSON(parts, b) {
			parts = append(parts, string(b))
		}
	}
	text := strings.Join(parts, "\n")
	if text == "" {
		text = "(the tool returned no content)"
	}
	return loop.Result{Content: truncateResult(text), IsError: r.IsError}
}

// embedded summarizes an embedded resource: text resources are shown (they
// are text), blobs are described.
func embedded(rc *mcp.ResourceContents) string {
	if rc == nil {
		return "[embedded resource without contents]"
	}
	if rc.Text != "" {
		return fmt.Sprintf("[embedded resource %s%s]\n%s", rc.URI, label(", ", rc.MIMEType), rc.Text)
	}
	return fmt.Sprintf("[embedded resource %s: %s, %d bytes, not shown]", rc.URI, orUnknown(rc.MIMEType), len(rc.Blob))
}

// containsJSON reports whether one of the text parts already is the
// structured content (servers are asked to send both).
func containsJSON(parts []string, b []byte) bool {
	want, err := loop.CanonicalJSON(b)
	if err != nil {
		return false
	}
	for _, p := range parts {
		if !json.Valid([]byte(p)) {
			continue
		}
		if got, err := loop.CanonicalJSON(json.RawMessage(p)); err == nil && string(got) == string(want) {
			return true
		}
	}
	return false
}

func truncateResult(s string) string {
	if len(s) <= MaxResultBytes {
		return s
	}
	cut := MaxResultBytes
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf(truncationMarker, cut, len(s))
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown type"
	}
	return mime
}

func label(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

package docstore

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/loop"
)

func TestToolDefinitions(t *testing.T) {
	tools := Tools(newTestDirBackend(t))
	tb, err := loop.NewToolbox(tools...)
	if err != nil {
		t.Fatalf("NewToolbox: %v", err)
	}
	want := map[string]struct {
		effect     loop.Effect
		idempotent bool
		preview    bool
	}{
		ToolListDocuments:   {loop.EffectRead, false, false},
		ToolReadDocument:    {loop.EffectRead, false, false},
		ToolSearchDocuments: {loop.EffectRead, false, false},
		ToolWriteDocument:   {loop.EffectWrite, true, true},
		ToolDeleteDocument:  {loop.EffectWrite, true, true},
	}
	if got := strings.Join(tb.Names(), " "); got != "list_documents read_document search_documents write_document delete_document" {
		t.Errorf("tool names = %s", got)
	}
	for _, tool := range tools {
		def := tool.Definition()
		w := want[def.Name]
		if def.Effect != w.effect || def.Idempotent != w.idempotent {
			t.Errorf("%s: effect %s, idempotent %v; want %s, %v", def.Name, def.Effect, def.Idempotent, w.effect, w.idempotent)
		}
		var schema struct {
			AdditionalProperties *bool `json:"additionalProperties"`
		}
		if err := json.Unmarshal(def.InputSchema, &schema); err != nil || schema.AdditionalProperties == nil || *schema.AdditionalProperties {
			t.Errorf("%s: schema must set additionalProperties false: %s", def.Name, def.InputSchema)
		}
		if def.Description == "" {
			t.Errorf("%s: empty description", def.Name)
		}
		// The writes' previews carry a base (the document they show), so an
		// approved call acts only on the document the approver saw.
		if p, ok := tool.(*loop.FuncTool); !ok || p.PreviewFunc != nil || (p.BasedPreviewFunc != nil) != w.preview {
			t.Errorf("%s: has based preview = %v, want %v (and no plain preview)", def.Name, ok && p.BasedPreviewFunc != nil, w.preview)
		}
	}
}

func TestToolSchemas(t *testing.T) {
	tb, err := loop.NewToolbox(Tools(newTestDirBackend(t))...)
	if err != nil {
		t.Fatalf("NewToolbox: %v", err)
	}
	tests := []struct {
		tool  string
		input string
		ok    bool
	}{
		{ToolListDocuments, `{}`, true},
		{ToolListDocuments, `{"prefix":"guide/"}`, true},
		{ToolListDocuments, `{"prefix":3}`, false},
		{ToolListDocuments, `{"extra":true}`, false},
		{ToolReadDocument, `{"path":"a.md"}`, true},
		{ToolReadDocument, `{}`, false},
		{ToolReadDocument, `{"path":""}`, false},
		{ToolReadDocument, `{"path":"` + strings.Repeat("a", 513) + `"}`, false},
		{ToolReadDocument, `{"path":"a.md","text":"x"}`, false},
		{ToolSearchDocuments, `{"query":"fox"}`, true},
		{ToolSearchDocuments, `{"query":"fox","limit":50}`, true},
		{ToolSearchDocuments, `{"query":"fox","limit":51}`, false},
		{ToolSearchDocuments, `{"query":"fox","limit":0}`, false},
		{ToolSearchDocuments, `{"query":"fox","limit":1.5}`, false},
		{ToolSearchDocuments, `{"query":""}`, false},
		{ToolSearchDocuments, `{"limit":3}`, false},
		{ToolWriteDocument, `{"path":"a.md","text":""}`, true},
		{ToolWriteDocument, `{"path":"a.md"}`, false},
		{ToolWriteDocument, `{"text":"x"}`, false},
		{ToolWriteDocument, `{"path":"a.md","text":null}`, false},
		{ToolWriteDocument, `{"path":"a.md","text":"x","mode":"append"}`, false},
		{ToolDeleteDocument, `{"path":"a.md"}`, true},
		{ToolDeleteDocument, `{"path":["a.md"]}`, false},
		{ToolDeleteDocument, `{"path":"a.md","force":true}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.input[:min(len(tt.input), 40)], func(t *testing.T) {
			err := tb.ValidateInput(tt.tool, json.RawMessage(tt.input))
			if (err == nil) != tt.ok {
				t.Errorf("ValidateInput(%s, %s) = %v, want ok %v", tt.tool, tt.input, err, tt.ok)
			}
		})
	}
}

// The limits live in one place (the constants); the schemas the model sees
// and the README say the same.
func TestLimitsAgreeWithSchemasAndREADME(t *testing.T) {
	for _, tool := range Tools(newTestDirBackend(t)) {
		var schema struct {
			Properties map[string]struct {
				MaxLength *int `json:"maxLength"`
			} `json:"properties"`
		}
		def := tool.Definition()
		if err := json.Unmarshal(def.InputSchema, &schema); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]int{"path": MaxPathBytes, "prefix": MaxPathBytes, "text": MaxDocumentBytes} {
			if p, ok := schema.Properties[name]; ok && (p.MaxLength == nil || *p.MaxLength != want) {
				t.Errorf("%s: %s maxLength = %v, want %d", def.Name, name, p.MaxLength, want)
			}
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	for _, want := range []string{
		fmt.Sprintf("at most %d bytes of UTF-8 and each folder or file name at most %d bytes", MaxPathBytes, MaxSegmentBytes),
		fmt.Sprintf("at most %d bytes of UTF-8 text", MaxDocumentBytes),
		fmt.Sprintf("at most at %d entries and refuses a local folder with more than %d entries", maxListVisits, maxFolderEntries),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("README does not say %q", want)
		}
	}
}

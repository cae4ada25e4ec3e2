package main

// An MCP server whose tool listing fails as a turn is held: the approver
// is told, wherever the held call is shown, that the definition shown was
// not checked against the server and when it was listed.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/approval"
	"github.com/agentgate/agentgate/internal/approval/approvaltest"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/mcptool"
)

// openTicketScript opens a ticket (needs approval), then finishes.
const openTicketScript = `{"turns": [
  {"content": [{"type": "tool_use", "id": "toolu_ticket", "name": "crm__create_ticket", "input": {"title": "printer on fire"}}]},
  {"content": [{"type": "text", "text": "Ticket opened."}]}
]}`

// definitionNotePrefix begins the note on an unchecked definition.
const definitionNotePrefix = "could not be checked against the server when this turn was held"

func TestServeToolsTellsTheApproverADefinitionCouldNotBeChecked(t *testing.T) {
	for _, down := range []bool{false, true} {
		name := "listing succeeds"
		if down {
			name = "server down as the turn is held"
		}
		t.Run(name, func(t *testing.T) {
			crm := ticketServer(t)
			dir := t.TempDir()
			raw, err := json.Marshal(mcptool.File{Servers: []mcptool.Server{{Name: "crm", URL: crm.URL, TrustAnnotations: true}}})
			require.NoError(t, err)
			tools := filepath.Join(dir, "tools.json")
			require.NoError(t, os.WriteFile(tools, raw, 0o600))
			before := time.Now()
			ls := startLinkServer(t, linkServerOptions{script: openTicketScript, tools: tools})
			opened := time.Now()
			if down {
				crm.Close()
			}
			run, link := ls.suspend(nil)
			address := strings.TrimPrefix(crm.URL, "http://")

			// The API: GET /runs/{id} (validated against openapi.yaml).
			var got struct {
				Pending struct {
					Calls []json.RawMessage `json:"calls"`
				} `json:"pending"`
			}
			ls.alice.do(http.MethodGet, "/runs/"+run.ID, nil, http.StatusOK, &got)
			require.Len(t, got.Pending.Calls, 1)
			var call struct {
				Tool                 string                     `json:"tool"`
				DefinitionUnverified *loop.UnverifiedDefinition `json:"definition_unverified"`
			}
			require.NoError(t, json.Unmarshal(got.Pending.Calls[0], &call))
			assert.Equal(t, "crm__create_ticket", call.Tool)

			page := getPage(t, http.MethodGet, link)
			requirePage(t, page, http.StatusOK, "crm__create_ticket")
			mail := approvalMail(t, ls, run.ID)
			var c client.Run
			ls.alice.do(http.MethodGet, "/runs/"+run.ID, nil, http.StatusOK, &c)
			var cli bytes.Buffer
			writeRun(&cli, &c)
			writeHeldTurn(&cli, &c, false)

			if !down {
				assert.NotContains(t, string(got.Pending.Calls[0]), "definition_unverified", "a listing that succeeds leaves no note")
				for where, text := range map[string]string{"page": page.body, "mail text": mail.Text, "mail HTML": mail.HTML, "CLI": cli.String()} {
					assert.NotContains(t, text, definitionNotePrefix, where)
				}
				return
			}
			u := call.DefinitionUnverified
			require.NotNil(t, u, "GET /runs/{id}: %s", got.Pending.Calls[0])
			assert.Equal(t, "the connection was refused", u.Reason)
			assert.False(t, u.ListedAt.Before(before) || u.ListedAt.After(opened), "listed when serve started: got %s, want between %s and %s", u.ListedAt, before, opened)

			note := "The tool's definition could not be checked against the server when this turn was held: the connection was refused. " +
				"You are shown the definition listed at " + u.ListedAt.UTC().Format("Mon, 02 Jan 2006 15:04:05 UTC") + "."
			var escaped approval.HTML
			escaped.Text(note)
			assert.Contains(t, page.body, `<p class="notice" style="margin:0 0 4px">`+escaped.String()+"</p>", "the approval page")
			assert.Contains(t, mail.Text, "note: "+note, "the mail's text")
			assert.Contains(t, mail.HTML, escaped.String(), "the mail's HTML")
			assert.Contains(t, cli.String(), "    note: "+note+"\n", "runs get")
			assert.Contains(t, cli.String(), "    NOTE: "+note+"\n", "approvals show")
			for where, text := range map[string]string{"API": string(got.Pending.Calls[0]), "page": page.body, "mail text": mail.Text, "mail HTML": mail.HTML, "CLI": cli.String()} {
				assert.NotContains(t, text, address, "%s: the server's address is never shown", where)
			}
		})
	}
}

// approvalMail returns the first approval mail to linkApprover for run id
// (ls.suspend waited for it).
func approvalMail(t *testing.T, ls *linkServer, id string) approvaltest.SentMessage {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(ls.dir, "outbox"))
	require.NoError(t, err)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".eml") || !strings.Contains(e.Name(), id) || strings.Contains(e.Name(), "-reminder-") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(ls.dir, "outbox", e.Name()))
		require.NoError(t, err)
		m, err := approvaltest.ParseEML(string(raw))
		require.NoError(t, err)
		if len(m.To) == 1 && m.To[0] == linkApprover {
			return m
		}
	}
	t.Fatalf("no approval mail to %s for run %s", linkApprover, id)
	return approvaltest.SentMessage{}
}

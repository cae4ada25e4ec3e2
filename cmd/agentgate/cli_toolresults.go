package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/agentgate/agentgate/client"
)

// toolResultsVerb is `agentgate runs tool-results ID --results FILE`: submit
// the results of the run's handed-over client calls.
func toolResultsVerb() subcommand {
	var file, id string
	return subcommand{
		usage:   "ID --results FILE [--tool-results-id ID]",
		summary: "submit the results of the client calls a run handed over (exactly one per call)",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&file, "results", "", `the results as JSON (- for standard input): {"tool_results_id": ..., "results": [{"call_id", "content", "is_error"}]}, or the results array alone (the run's current tool-results id is used)`)
			fs.StringVar(&id, "tool-results-id", "", "the tool-results id the results answer (overrides the file's)")
		},
		run: func(ctx context.Context, g *globalFlags, args []string, w io.Writer) error {
			runID, err := oneID(args)
			if err != nil {
				return err
			}
			if file == "" {
				return usagef("give --results FILE")
			}
			b, err := readInput("--results", file)
			if err != nil {
				return err
			}
			sub, err := parseToolResults(b)
			if err != nil {
				return usagef("--results: %v", err)
			}
			if id != "" {
				sub.ToolResultsID = id
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if sub.ToolResultsID == "" {
				r, err := c.Run(ctx, runID)
				if err != nil {
					return err
				}
				if r.ToolResults == nil {
					return fmt.Errorf("run %s is %s: it does not wait for tool results", runID, r.Status)
				}
				sub.ToolResultsID = r.ToolResults.ToolResultsID
				// Sent again later (a retry after a timeout), the same
				// command would answer whatever hand-over is current then.
				fmt.Fprintf(cliStderr, "no tool-results id given: answering the run's current hand-over %s (pass --tool-results-id %s, or put it in the file, so that sending this again cannot answer a later hand-over)\n",
					sub.ToolResultsID, sub.ToolResultsID)
			}
			r, err := c.SubmitToolResults(ctx, runID, sub)
			if err != nil {
				if client.ErrorCode(err) == client.CodeConflict {
					return fmt.Errorf("%w\nthe run does not wait for these results (not handed over yet, submitted already, or handed over again): look with `agentgate runs get %s`", err, runID)
				}
				return err
			}
			return output(g, w, r, func() {
				fmt.Fprintf(w, "%d result(s) recorded; run %s is %s\n", len(sub.Results), r.ID, r.Status)
			})
		},
	}
}

// toolCallsVerb is `agentgate runs tool-calls ID`: the client calls a run
// handed over, each with its whole final input (read page by page when the
// run shows it shortened), as the JSON a caller executes them from.
func toolCallsVerb() subcommand {
	return subcommand{
		usage:   "ID",
		summary: "print the client calls a run handed over, each with its whole input, as JSON",
		run: func(ctx context.Context, g *globalFlags, args []string, w io.Writer) error {
			runID, c, err := g.runClient(args)
			if err != nil {
				return err
			}
			r, err := c.Run(ctx, runID)
			if err != nil {
				return err
			}
			if r.ToolResults == nil {
				return fmt.Errorf("run %s is %s: it does not wait for tool results", runID, r.Status)
			}
			type toolCall struct {
				ID     string          `json:"id"`
				Name   string          `json:"name"`
				Input  json.RawMessage `json:"input"`
				Edited bool            `json:"edited,omitempty"`
			}
			out := struct {
				ToolResultsID string     `json:"tool_results_id"`
				Calls         []toolCall `json:"calls"`
			}{ToolResultsID: r.ToolResults.ToolResultsID, Calls: []toolCall{}}
			for _, call := range r.ToolResults.Calls {
				in, err := c.ClientCallInput(ctx, runID, call)
				if err != nil {
					return fmt.Errorf("input of client call %s: %w", call.ID, err)
				}
				out.Calls = append(out.Calls, toolCall{ID: call.ID, Name: call.Name, Input: in, Edited: call.Edited})
			}
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			return enc.Encode(out)
		},
	}
}

// parseToolResults reads a submission, or a bare array of results.
func parseToolResults(b []byte) (client.ToolResults, error) {
	var sub client.ToolResults
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sub.Results); err != nil {
			return sub, err
		}
		return sub, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(trimmed)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sub); err != nil {
		return sub, err
	}
	return sub, nil
}

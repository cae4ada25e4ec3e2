// Package toolpattern matches tool names against the patterns deployment
// files use: a builtin name (write_document), an MCP tool name
// (<server>__<tool>, e.g. github__create_issue), or a glob where * stands
// for any run of characters (github__*, *__delete_*, *).
//
// Patterns are parsed strictly: only the characters tool names may contain
// (ASCII letters, digits, '_', '-', '.') and '*'. There are no character
// classes and no escapes, so a pattern means what it looks like.
package toolpattern

// Package strictjson reads JSON that must mean one thing: it checks that a
// value is I-JSON (RFC 7493) and says what is wrong with one that is not,
// in the words the API's answers and the loop's tool errors share; and it
// decodes the lists of the operator's files (the directory, the tool
// sources) entry by entry, so that an error names the entry it is in.
package strictjson

package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Entries decodes data, the JSON array list of a file, into out, each
// entry on its own and strictly (an unknown field is an error). An error
// names the entry by name(i, raw) and, for a member of the wrong type, the
// member: "<entry>: <field>: json: cannot unmarshal <value> into <type>".
// array and object say what the list and an entry are in the messages for
// either of the wrong type ("an array of servers", "a server object").
func Entries[T any](out *[]T, data []byte, list string, name func(i int, raw json.RawMessage) string, array, object string) error {
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return fmt.Errorf("%s: json: cannot unmarshal %s into %s", list, typeErr.Value, array)
		}
		return err
	}
	if raws == nil {
		*out = nil
		return nil
	}
	entries := make([]T, len(raws))
	for i, raw := range raws {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&entries[i]); err != nil {
			where := name(i, raw)
			var typeErr *json.UnmarshalTypeError
			switch {
			case errors.As(err, &typeErr) && typeErr.Field != "":
				return fmt.Errorf("%s: %s: json: cannot unmarshal %s into %s", where, typeErr.Field, typeErr.Value, typeErr.Type)
			case errors.As(err, &typeErr):
				return fmt.Errorf("%s: json: cannot unmarshal %s into %s", where, typeErr.Value, object)
			}
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	*out = entries
	return nil
}

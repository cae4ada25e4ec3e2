package approval

import (
	"fmt"
	"net/mail"
	"unicode"
	"unicode/utf8"
)

// MaxAddressLength is the longest e-mail address an approver may have
// (RFC 5321: 64 octets of local part, 255 of domain).
const MaxAddressLength = 320

// CheckAddress accepts exactly one plain addr-spec (`local@domain`, as
// net/mail parses it): no display name, no comment, no angle brackets, no
// surrounding space, and no control, separator (U+0085, U+2028, U+2029,
// any space) or format character (bidirectional overrides, zero-width
// characters) anywhere, so the address is safe to write into a To: header
// as it is. The address is ASCII, as internal/identity requires of approvers
// (no look-alike letters) and as SES sends: an RFC 5322 header holds no
// other bytes (an internationalized domain goes in its xn-- form). Its
// error message is meant for the API caller.
func CheckAddress(s string) error {
	if s == "" || len(s) > MaxAddressLength {
		return fmt.Errorf("an e-mail address has 1 to %d bytes", MaxAddressLength)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%q is not valid UTF-8", s)
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.In(r, unicode.Z, unicode.Cf) || r == utf8.RuneError {
			return fmt.Errorf("%q contains a space, control, separator or format character (U+%04X)", s, r)
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return fmt.Errorf("%q is not ASCII (give an internationalized domain in its xn-- form)", s)
		}
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return fmt.Errorf("%q is not one plain e-mail address (local@domain, without a display name)", s)
	}
	return nil
}

package dynamo

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// MaxItemSize is DynamoDB's limit on one item: attribute names and values
// together, 400 KB.
const MaxItemSize = 400 << 10

// ItemSize returns the size DynamoDB counts for item: the UTF-8 bytes of
// each attribute name and value (numbers about one byte per two digits,
// plus one), with the per-element overhead of lists and maps.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return (len(strings.TrimLeft(v.Value, "-0."))+1)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateTable creates the table per CONTRACTS.md (pk/sk, the due-index GSI
// with projection KEYS_ONLY: Due reads the rows, on-demand billing), waits until it is active and turns
// on TTL on expires_at. An existing table is fine: CreateTable is idempotent.
// It reports whether it created the table.
func CreateTable(ctx context.Context, client *dynamodb.Client, name string) (created bool, err error) {
	s := func(v string) *string { return &v }
	_, err = client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   &name,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: s("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: s("sk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: s("due_pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: s("due_at"), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: s("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: s("sk"), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: s(DueIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: s("due_pk"), KeyType: types.KeyTypeHash},
				{AttributeName: s("due_at"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	})
	var inUse *types.ResourceInUseException
	switch {
	case err == nil:
		created = true
	case errors.As(err, &inUse):
	default:
		return false, fmt.Errorf("create table %s: %w", name, err)
	}
	if err := dynamodb.NewTableExistsWaiter(client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, 2*time.Minute); err != nil {
		return created, fmt.Errorf("wait for table %s: %w", name, err)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &name})
	if err != nil {
		return created, fmt.Errorf("describe ttl of %s: %w", name, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == TTLAttribute &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return created, nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               &name,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: s(TTLAttribute), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return created, fmt.Errorf("enable ttl on %s: %w", name, err)
	}
	return created, nil
}

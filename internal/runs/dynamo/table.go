package dynamo

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentgate/agentgate/internal/runs"
)

// DefaultDueShards is the number of due-index shards when Options leave it 0.
const DefaultDueShards = 8

// batchWriteMax is BatchWriteItem's limit of requests per call.
const batchWriteMax = 25

// Options configure a Table.
type Options struct {
	// DueShards is the number of due-index partitions (AGENTGATE_DUE_SHARDS).
	// It must stay the same for the life of a table.
	DueShards int
}

// Table is the single DynamoDB table of agentgate. It implements
// runs.RowStore.
type Table struct {
	client *dynamodb.Client
	name   string
	shards int
	cache  rowCache
}

var (
	_ runs.RowStore  = (*Table)(nil)
	_ runs.RowPrimer = (*Table)(nil)
)

// NewTable returns the table called name, reached through client.
func NewTable(client *dynamodb.Client, name string, opts Options) *Table {
	if opts.DueShards <= 0 {
		opts.DueShards = DefaultDueShards
	}
	return &Table{client: client, name: name, shards: opts.DueShards}
}

// Name returns the table name.
func (t *Table) Name() string { return t.name }

func keyOf(pk, sk string) (map[string]types.AttributeValue, error) {
	return attributevalue.MarshalMap(key{PK: pk, SK: sk})
}

// getItem reads the item at (pk, sk) into out with a strongly consistent
// GetItem; found is false when there is none. what names the item in a
// decoding error.
func (t *Table) getItem(ctx context.Context, pk, sk, what string, out any) (found bool, err error) {
	k, err := keyOf(pk, sk)
	if err != nil {
		return false, err
	}
	res, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &t.name, Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, translate(err)
	}
	if res.Item == nil {
		return false, nil
	}
	if err := attributevalue.UnmarshalMap(res.Item, out); err != nil {
		return false, fmt.Errorf("decode %s: %w", what, err)
	}
	return true, nil
}

// GetRun implements runs.RowStore with one strongly consistent Query of
// the row and the parts it keeps apart (sort keys beginning with RUN).
func (t *Table) GetRun(ctx context.Context, id string) (*runs.Run, error) {
	for attempt := 1; ; attempt++ {
		r, err := t.getRun(ctx, id)
		if !errors.Is(err, errTornRow) || attempt == tornReadAttempts {
			return r, err
		}
	}
}

// getRun is one strongly consistent Query of the run's row and parts.
func (t *Table) getRun(ctx context.Context, id string) (*runs.Run, error) {
	kc := expression.Key("pk").Equal(expression.Value(runPK(id))).And(expression.Key("sk").BeginsWith(runSK))
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName:                 &t.name,
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true),
	}
	var row map[string]types.AttributeValue
	parts := map[string]partItem{}
	p := dynamodb.NewQueryPaginator(t.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, translate(err)
		}
		for _, m := range page.Items {
			var it partItem
			if err := attributevalue.UnmarshalMap(m, &it); err != nil {
				return nil, fmt.Errorf("decode run %s: %w", id, err)
			}
			if it.SK == runSK {
				row = m
				continue
			}
			parts[it.SK] = it
		}
	}
	if row == nil {
		return nil, runs.Errorf(runs.ENotFound, "run %s not found", id)
	}
	r, apart, err := decodeRun(row, parts)
	if err != nil {
		return nil, err
	}
	t.cache.put(id, r.Version, apart)
	return r, nil
}

// PrimeRow implements runs.RowPrimer: the table remembers which parts r
// keeps apart at r.Version (as encoding r stores them), as if it had read
// r, unless it knows the run at that version or a later one already. A
// write that then leaves a part item out is conditional on the stored row
// naming that part with the same hash (rowPut).
func (t *Table) PrimeRow(r *runs.Run) {
	if r == nil {
		return
	}
	parts, err := rowParts(r)
	if err != nil {
		return // never worse than not primed
	}
	apart := map[string]string{}
	for name, js := range parts {
		sum := sha256.Sum256(js)
		apart[name] = hex.EncodeToString(sum[:])
	}
	if len(apart) == 0 {
		apart = nil
	}
	t.cache.prime(r.ID, r.Version, apart)
}

// Write implements runs.RowStore: one conditional PutItem when only the row
// changes, else one TransactWriteItems (row, the row's parts that changed,
// events, new tokens, token use, inbox entries).
func (t *Table) Write(ctx context.Context, w runs.Write) error {
	if k := w.IdempotencyKey; k != nil && (!w.Create || k.RunID != w.Run.ID || len(w.Events) == 0) {
		return fmt.Errorf("an idempotency key is stored only by the write that creates its run, with its event (run %s)", w.Run.ID)
	}
	row, apart, parts, err := t.rowPut(w)
	if err != nil {
		return err
	}
	if len(parts) == 0 && len(w.Events) == 0 && len(w.NewTokens) == 0 && w.UseToken == nil && len(w.NewInbox) == 0 && len(w.DropInbox) == 0 {
		_, err := t.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 &t.name,
			Item:                      row.Item,
			ConditionExpression:       row.ConditionExpression,
			ExpressionAttributeNames:  row.ExpressionAttributeNames,
			ExpressionAttributeValues: row.ExpressionAttributeValues,
		})
		if err == nil {
			t.cache.put(w.Run.ID, w.Run.Version, apart)
		}
		return translate(err)
	}
	items := []types.TransactWriteItem{{Put: row}}
	for _, p := range parts {
		item, err := attributevalue.MarshalMap(p)
		if err != nil {
			return fmt.Errorf("encode %s of run %s: %w", p.SK, w.Run.ID, err)
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &t.name, Item: item}})
	}
	hashes := make([]string, len(w.NewTokens))
	for i, tok := range w.NewTokens {
		hashes[i] = tok.Hash
	}
	evItems, err := newEventItems(w.Events)
	if err != nil {
		return err
	}
	for i, it := range evItems {
		if i == 0 && len(hashes) > 0 {
			it.TokenHashes = hashes
		}
		if i == 0 && w.IdempotencyKey != nil {
			it.IdempotencyKey = w.IdempotencyKey.Hash
		}
		put, err := newPut(t.name, it)
		if err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Put: put})
	}
	if len(w.Events) == 0 && len(hashes) > 0 {
		put, err := newPut(t.name, tokenListItem{key: key{PK: runPK(w.Run.ID), SK: tokenListPrefix + w.Run.WriteID}, TokenHashes: hashes})
		if err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Put: put})
	}
	for _, tok := range w.NewTokens {
		put, err := newPut(t.name, newTokenItem(tok))
		if err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Put: put})
	}
	if w.IdempotencyKey != nil {
		put, err := t.idemKeyPut(w)
		if err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Put: put})
	}
	if u := w.UseToken; u != nil {
		upd, err := t.tokenUse(u)
		if err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Update: upd})
	}
	for _, e := range w.NewInbox {
		item, err := attributevalue.MarshalMap(newInboxItem(e))
		if err != nil {
			return fmt.Errorf("encode inbox entry: %w", err)
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &t.name, Item: item}})
	}
	for _, k := range w.DropInbox {
		dk, err := attributevalue.MarshalMap(inboxKeyOf(k))
		if err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: &t.name, Key: dk}})
	}
	_, err = t.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: requestToken(w),
	})
	if err == nil {
		t.cache.put(w.Run.ID, w.Run.Version, apart)
	}
	return translate(err)
}

// requestToken makes TransactWriteItems idempotent for the SDK's retries:
// every write carries a fresh WriteID (32 hex digits: random, or random
// and a digest of the row, whose version and time differ from any other
// write's; runs.SealWriteID), so a retry of the same write is
// deduplicated and no other write shares its token.
func requestToken(w runs.Write) *string {
	if w.Run.WriteID == "" || len(w.Run.WriteID) > 36 {
		return nil
	}
	return aws.String(w.Run.WriteID)
}

// rowPut is the conditional Put of the run row, what the row keeps apart
// and the part items to write with it: all of them, but those the stored
// row (at w.ExpectVersion, as the cache knows it) already names with the
// same content.
func (t *Table) rowPut(w runs.Write) (*types.Put, map[string]string, []partItem, error) {
	it, parts, err := encodeRow(w.Run, t.shards)
	if err != nil {
		return nil, nil, nil, err
	}
	var kept []partItem
	if !w.Create {
		if stored, ok := t.cache.stored(w.Run.ID, w.ExpectVersion); ok {
			parts = slices.DeleteFunc(parts, func(p partItem) bool {
				name := strings.TrimPrefix(p.SK, runSK+"#")
				if stored[name] == p.SHA256 {
					kept = append(kept, p)
					return true
				}
				return false
			})
		}
	}
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encode run %s: %w", w.Run.ID, err)
	}
	cond := expression.Name("pk").AttributeNotExists()
	if !w.Create {
		cond = expression.Name("status").Equal(expression.Value(string(w.ExpectStatus))).
			And(expression.Name("version").Equal(expression.Value(w.ExpectVersion)))
		// A part item left out must be the stored row's: the row names it
		// with the same hash. The cache is filled from reads and writes
		// of this process and from primed rows (PrimeRow); the condition
		// makes a wrong entry fail the write rather than leave a row that
		// names a part item nobody wrote. It costs nothing.
		for _, p := range kept {
			name := strings.TrimPrefix(p.SK, runSK+"#")
			cond = cond.And(expression.Name(apartAttr + "." + name).Equal(expression.Value(p.SHA256)))
		}
		if w.ExpectWriteID != "" {
			cond = cond.And(expression.Name("write_id").Equal(expression.Value(w.ExpectWriteID)))
		}
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, nil, nil, err
	}
	return &types.Put{
		TableName:                 &t.name,
		Item:                      item,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}, it.Apart, parts, nil
}

// newPut is a Put of a new item (events, tokens) that must not exist yet.
func newPut(table string, v any) (*types.Put, error) {
	item, err := attributevalue.MarshalMap(v)
	if err != nil {
		return nil, err
	}
	ne, err := notExists()
	if err != nil {
		return nil, err
	}
	return &types.Put{
		TableName:                &table,
		Item:                     item,
		ConditionExpression:      &ne.cond,
		ExpressionAttributeNames: ne.names,
	}, nil
}

// notExists is the condition "attribute_not_exists(pk)", built once.
var notExists = sync.OnceValues(func() (notExistsExpr, error) {
	expr, err := expression.NewBuilder().WithCondition(expression.Name("pk").AttributeNotExists()).Build()
	if err != nil {
		return notExistsExpr{}, err
	}
	return notExistsExpr{cond: *expr.Condition(), names: expr.Names()}, nil
})

type notExistsExpr struct {
	cond  string
	names map[string]string
}

// idemKeyPut is the Put of w's idempotency key: on the condition that no
// key with its hash exists or, when w takes the key over from a run no
// longer stored (ReplaceKeyOf), that the stored key names that run.
func (t *Table) idemKeyPut(w runs.Write) (*types.Put, error) {
	if w.ReplaceKeyOf == "" {
		return newPut(t.name, newIdemKeyItem(*w.IdempotencyKey))
	}
	item, err := attributevalue.MarshalMap(newIdemKeyItem(*w.IdempotencyKey))
	if err != nil {
		return nil, err
	}
	cond := expression.Name("pk").AttributeNotExists().Or(expression.Name("run_id").Equal(expression.Value(w.ReplaceKeyOf)))
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, err
	}
	return &types.Put{
		TableName:                 &t.name,
		Item:                      item,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}, nil
}

// IdempotencyKey implements runs.RowStore with a strongly consistent
// GetItem.
func (t *Table) IdempotencyKey(ctx context.Context, hash string) (*runs.IdempotencyKey, error) {
	var it idemKeyItem
	found, err := t.getItem(ctx, idemKeyPK(hash), idemKeySK, "idempotency key", &it)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, runs.Errorf(runs.ENotFound, "idempotency key not found")
	}
	return it.idempotencyKey(), nil
}

// tokenUse marks a token used if it is bound to the run and suspension,
// unused and unexpired.
func (t *Table) tokenUse(u *runs.TokenUse) (*types.Update, error) {
	k, err := keyOf(tokenPK(u.Hash), tokenSK)
	if err != nil {
		return nil, err
	}
	at := toMS(u.At)
	cond := expression.Name("pk").AttributeExists().
		And(expression.Name("run_id").Equal(expression.Value(u.RunID))).
		And(expression.Name("suspension_id").Equal(expression.Value(u.SuspensionID))).
		And(expression.Name("used_at").AttributeNotExists()).
		And(expression.Name("link_expires_at").GreaterThan(expression.Value(at)))
	expr, err := expression.NewBuilder().
		WithCondition(cond).
		WithUpdate(expression.Set(expression.Name("used_at"), expression.Value(at))).
		Build()
	if err != nil {
		return nil, err
	}
	return &types.Update{
		TableName:                 &t.name,
		Key:                       k,
		ConditionExpression:       expr.Condition(),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}, nil
}

// PutEvent implements runs.RowStore with one PutItem of an event item
// holding ev alone, under its own number, if no item has that key (every
// other write gives the kept number no event, so no other item holds it).
// It touches no other item: a transaction with a ConditionCheck on the run's
// row would make a worker's concurrent write of that row fail
// (TransactionConflict), and the caller has read the row just before. It
// carries no request token: an SDK retry of a Put that landed finds its
// item and answers EConflict, which tells the caller the event is stored.
func (t *Table) PutEvent(ctx context.Context, ev runs.Event) error {
	its, err := newEventItems([]runs.Event{ev})
	if err != nil {
		return err
	}
	put, err := newPut(t.name, its[0])
	if err != nil {
		return err
	}
	_, err = t.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: put.TableName, Item: put.Item,
		ConditionExpression: put.ConditionExpression, ExpressionAttributeNames: put.ExpressionAttributeNames,
		ExpressionAttributeValues: put.ExpressionAttributeValues,
	})
	return translate(err)
}

// Events implements runs.RowStore with strongly consistent Query pages of
// the run's event items from the one holding Seq after+1 on (an item is
// sorted under the last Seq it holds), until limit events are read.
func (t *Table) Events(ctx context.Context, runID string, after int64, limit int) ([]runs.Event, error) {
	kc := expression.Key("pk").Equal(expression.Value(runPK(runID))).
		And(expression.Key("sk").Between(expression.Value(eventSK(after+1)), expression.Value(eventPrefix+"~")))
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName:                 &t.name,
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true),
	}
	var out []runs.Event
	for len(out) < limit {
		in.Limit = pageLimit(limit - len(out))
		res, err := t.client.Query(ctx, in)
		if err != nil {
			return nil, translate(err)
		}
		for _, m := range res.Items {
			var it eventItem
			if err := attributevalue.UnmarshalMap(m, &it); err != nil {
				return nil, fmt.Errorf("decode event of run %s: %w", runID, err)
			}
			evs, err := it.events(runID)
			if err != nil {
				return nil, err
			}
			for _, ev := range evs {
				if ev.Seq > after && len(out) < limit {
					out = append(out, ev)
				}
			}
		}
		if res.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	return out, nil
}

// queryUpTo runs the query in, page by page, until it has read want items
// or the query ends, decoding each item with decode. last is the key to
// go on from when it stopped at want items with more possibly left; nil
// when the query ended.
func queryUpTo[T any](ctx context.Context, t *Table, in *dynamodb.QueryInput, want int, decode func(map[string]types.AttributeValue) (T, error)) (items []T, last map[string]types.AttributeValue, err error) {
	for len(items) < want {
		in.Limit = pageLimit(want - len(items))
		res, err := t.client.Query(ctx, in)
		if err != nil {
			return nil, nil, translate(err)
		}
		for _, m := range res.Items {
			v, err := decode(m)
			if err != nil {
				return nil, nil, err
			}
			items = append(items, v)
		}
		if res.LastEvaluatedKey == nil {
			return items, nil, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	return items, in.ExclusiveStartKey, nil
}

// Token implements runs.RowStore.
func (t *Table) Token(ctx context.Context, hash string) (*runs.ApprovalToken, error) {
	var it tokenItem
	found, err := t.getItem(ctx, tokenPK(hash), tokenSK, "token", &it)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, runs.Errorf(runs.ENotFound, "approval link not found")
	}
	return it.token(), nil
}

// dueCursor is where a Due page ended: the shard and, within it, the last
// key read (empty to start the shard from its beginning).
type dueCursor struct {
	Shard int    `json:"s"`
	PK    string `json:"p,omitempty"`
	SK    string `json:"k,omitempty"`
	DueAt int64  `json:"d,omitempty"`
}

type dueKey struct {
	key
	DuePK string `dynamodbav:"due_pk"`
	DueAt int64  `dynamodbav:"due_at"`
}

// Due implements runs.RowStore: it queries the due-index shard by shard for
// due_at <= now, so it reads only due runs, then reads their rows with
// BatchGetItem. The index projects only keys (KEYS_ONLY: a row write copies
// no attributes into it); an index that projects more (tables created with
// projection ALL) is read the same way. A row read back that is no longer
// due (it moved on since the index was read) is left out, so a page may hold
// fewer than limit runs while the cursor goes on.
func (t *Table) Due(ctx context.Context, now time.Time, limit int, cursor string) ([]*runs.Run, string, error) {
	var c dueCursor
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || json.Unmarshal(b, &c) != nil || c.Shard < 0 || c.Shard >= t.shards {
			return nil, "", runs.Errorf(runs.EInvalid, "due cursor is malformed")
		}
	}
	var keys []key
	next := ""
	for shard := c.Shard; shard < t.shards && next == ""; shard++ {
		kc := expression.Key("due_pk").Equal(expression.Value(duePK(shard))).
			And(expression.Key("due_at").LessThanEqual(expression.Value(toMS(now))))
		expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
		if err != nil {
			return nil, "", err
		}
		in := &dynamodb.QueryInput{
			TableName:                 &t.name,
			IndexName:                 aws.String(DueIndex),
			KeyConditionExpression:    expr.KeyCondition(),
			ExpressionAttributeNames:  expr.Names(),
			ExpressionAttributeValues: expr.Values(),
		}
		if shard == c.Shard && c.PK != "" {
			start, err := attributevalue.MarshalMap(dueKey{key: key{PK: c.PK, SK: c.SK}, DuePK: duePK(shard), DueAt: c.DueAt})
			if err != nil {
				return nil, "", err
			}
			in.ExclusiveStartKey = start
		}
		ks, last, err := queryUpTo(ctx, t, in, limit-len(keys), func(m map[string]types.AttributeValue) (key, error) {
			var k key
			if err := attributevalue.UnmarshalMap(m, &k); err != nil {
				return key{}, fmt.Errorf("decode due key: %w", err)
			}
			return k, nil
		})
		if err != nil {
			return nil, "", err
		}
		keys = append(keys, ks...)
		if len(keys) < limit {
			continue
		}
		nc := dueCursor{Shard: shard + 1}
		if last != nil {
			var k dueKey
			if err := attributevalue.UnmarshalMap(last, &k); err != nil {
				return nil, "", err
			}
			nc = dueCursor{Shard: shard, PK: k.PK, SK: k.SK, DueAt: k.DueAt}
		}
		if nc.Shard == t.shards {
			break
		}
		b, _ := json.Marshal(nc)
		next = base64.RawURLEncoding.EncodeToString(b)
	}
	rows, err := t.getRuns(ctx, keys)
	if err != nil {
		return nil, "", err
	}
	out := make([]*runs.Run, 0, len(rows))
	for _, r := range rows {
		if r != nil && !r.DueAt.IsZero() && !r.DueAt.After(now) {
			out = append(out, r)
		}
	}
	return out, next, nil
}

// batchGetMax is BatchGetItem's limit of keys per call.
const batchGetMax = 100

// getRuns reads the run rows at keys, and the parts they keep apart, with
// strongly consistent BatchGetItem calls, and returns them in the order of
// keys; a row that no longer exists is nil.
func (t *Table) getRuns(ctx context.Context, keys []key) ([]*runs.Run, error) {
	rows, err := t.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	var partKeys []key
	for _, k := range keys {
		m := rows[k]
		if m == nil {
			continue
		}
		var it struct {
			Apart map[string]string `dynamodbav:"apart"`
		}
		if err := attributevalue.UnmarshalMap(m, &it); err != nil {
			return nil, fmt.Errorf("decode due run: %w", err)
		}
		for name := range it.Apart {
			partKeys = append(partKeys, key{PK: k.PK, SK: partSK(name)})
		}
	}
	partItems, err := t.batchGet(ctx, partKeys)
	if err != nil {
		return nil, err
	}
	out := make([]*runs.Run, len(keys))
	for i, k := range keys {
		m := rows[k]
		if m == nil {
			continue
		}
		parts := map[string]partItem{}
		for pk, pm := range partItems {
			if pk.PK != k.PK {
				continue
			}
			var it partItem
			if err := attributevalue.UnmarshalMap(pm, &it); err != nil {
				return nil, fmt.Errorf("decode due run: %w", err)
			}
			parts[pk.SK] = it
		}
		r, apart, err := decodeRun(m, parts)
		if errors.Is(err, errTornRow) {
			// Written between the reads of rows and parts: read the run
			// again on its own.
			r, err = t.GetRun(ctx, strings.TrimPrefix(k.PK, runPrefix))
			if runs.ErrorCode(err) == runs.ENotFound {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[i] = r
			continue
		}
		if err != nil {
			return nil, err
		}
		t.cache.put(r.ID, r.Version, apart)
		out[i] = r
	}
	return out, nil
}

// batchGet reads the items at keys with strongly consistent BatchGetItem
// calls (100 keys each, unprocessed keys resubmitted with backoff); an item
// that does not exist is absent from the result.
func (t *Table) batchGet(ctx context.Context, keys []key) (map[key]map[string]types.AttributeValue, error) {
	out := make(map[key]map[string]types.AttributeValue, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), batchGetMax)
		req := make([]map[string]types.AttributeValue, n)
		for i, k := range keys[:n] {
			m, err := keyOf(k.PK, k.SK)
			if err != nil {
				return nil, err
			}
			req[i] = m
		}
		keys = keys[n:]
		backoff := 50 * time.Millisecond
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt == 8 {
				return nil, fmt.Errorf("batch get: %d items left unprocessed", len(req))
			}
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(backoff):
				}
				backoff *= 2
			}
			res, err := t.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				t.name: {Keys: req, ConsistentRead: aws.Bool(true)},
			}})
			if err != nil {
				return nil, translate(err)
			}
			for _, m := range res.Responses[t.name] {
				var k key
				if err := attributevalue.UnmarshalMap(m, &k); err != nil {
					return nil, fmt.Errorf("decode item: %w", err)
				}
				out[k] = m
			}
			req = res.UnprocessedKeys[t.name].Keys
		}
	}
	return out, nil
}

// inboxCursor is where an Inbox page ended: the approver whose inbox it
// is and the sort key of the last entry returned.
type inboxCursor struct {
	Approver string `json:"a"`
	SK       string `json:"k"`
}

// Inbox implements runs.RowStore with a strongly consistent Query of the
// approver's partition, so it reads only that approver's entries.
func (t *Table) Inbox(ctx context.Context, approver string, limit int, cursor string) ([]runs.InboxEntry, string, error) {
	pk := inboxPK(approver)
	kc := expression.Key("pk").Equal(expression.Value(pk))
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, "", err
	}
	in := &dynamodb.QueryInput{
		TableName:                 &t.name,
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true),
	}
	if cursor != "" {
		var c inboxCursor
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || json.Unmarshal(b, &c) != nil || c.Approver != approver || !validInboxSK(c.SK) {
			return nil, "", runs.Errorf(runs.EInvalid, "inbox cursor is malformed")
		}
		start, err := attributevalue.MarshalMap(key{PK: pk, SK: c.SK})
		if err != nil {
			return nil, "", err
		}
		in.ExclusiveStartKey = start
	}
	out, last, err := queryUpTo(ctx, t, in, limit, func(m map[string]types.AttributeValue) (runs.InboxEntry, error) {
		var it inboxItem
		if err := attributevalue.UnmarshalMap(m, &it); err != nil {
			return runs.InboxEntry{}, fmt.Errorf("decode inbox entry: %w", err)
		}
		return it.entry(), nil
	})
	if err != nil {
		return nil, "", err
	}
	if last == nil {
		if out == nil {
			out = []runs.InboxEntry{}
		}
		return out, "", nil
	}
	var k key
	if err := attributevalue.UnmarshalMap(last, &k); err != nil {
		return nil, "", err
	}
	b, _ := json.Marshal(inboxCursor{Approver: approver, SK: k.SK})
	return out, base64.RawURLEncoding.EncodeToString(b), nil
}

// validInboxSK reports whether sk has the form inboxSK writes.
func validInboxSK(sk string) bool {
	ms, id, ok := strings.Cut(sk, "#")
	if !ok || len(ms) != 13 || !runs.ValidRunID(id) {
		return false
	}
	for _, c := range ms {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// DeleteRun implements runs.RowStore: it queries the run's partition (keys,
// the token hashes its items list: the first event of each write that
// issued tokens, and the row of a run written before; and the hash of the
// idempotency key the run was created under, on its first event item),
// deletes the idempotency key if it still names the run (a conditional
// DeleteItem: a key taken over by a later run stays), then the tokens, the
// partition's items and the row last, in BatchWriteItem calls; a failure
// part-way leaves the row, so the next sweep finds the run and deletes the
// rest.
func (t *Table) DeleteRun(ctx context.Context, runID string, tokenHashes []string) error {
	expr, err := expression.NewBuilder().
		WithKeyCondition(expression.Key("pk").Equal(expression.Value(runPK(runID)))).
		WithProjection(expression.NamesList(expression.Name("pk"), expression.Name("sk"), expression.Name(tokenHashesAttr), expression.Name(idemKeyAttr))).
		Build()
	if err != nil {
		return err
	}
	p := dynamodb.NewQueryPaginator(t.client, &dynamodb.QueryInput{
		TableName:                 &t.name,
		KeyConditionExpression:    expr.KeyCondition(),
		ProjectionExpression:      expr.Projection(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true),
	})
	hashes := slices.Clone(tokenHashes)
	var idemKeys []string
	var items, row []map[string]types.AttributeValue
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return translate(err)
		}
		for _, m := range page.Items {
			var it struct {
				key
				TokenHashes    []string `dynamodbav:"token_hashes"`
				IdempotencyKey string   `dynamodbav:"idempotency_key"`
			}
			if err := attributevalue.UnmarshalMap(m, &it); err != nil {
				return fmt.Errorf("decode item of run %s: %w", runID, err)
			}
			hashes = append(hashes, it.TokenHashes...)
			if it.IdempotencyKey != "" {
				idemKeys = append(idemKeys, it.IdempotencyKey)
			}
			k, err := keyOf(it.PK, it.SK)
			if err != nil {
				return err
			}
			if it.SK == runSK {
				row = append(row, k)
			} else {
				items = append(items, k)
			}
		}
	}
	for _, h := range idemKeys {
		if err := t.deleteIdemKey(ctx, h, runID); err != nil {
			return err
		}
	}
	slices.Sort(hashes)
	var keys []map[string]types.AttributeValue
	for _, h := range slices.Compact(hashes) {
		k, err := keyOf(tokenPK(h), tokenSK)
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	keys = append(append(keys, items...), row...)
	for len(keys) > 0 {
		n := min(len(keys), batchWriteMax)
		if err := t.deleteBatch(ctx, keys[:n]); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// deleteIdemKey deletes the idempotency key with the given hash if it
// names run runID.
func (t *Table) deleteIdemKey(ctx context.Context, hash, runID string) error {
	k, err := keyOf(idemKeyPK(hash), idemKeySK)
	if err != nil {
		return err
	}
	expr, err := expression.NewBuilder().WithCondition(expression.Name("run_id").Equal(expression.Value(runID))).Build()
	if err != nil {
		return err
	}
	_, err = t.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &t.name,
		Key:                       k,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if err = translate(err); runs.ErrorCode(err) == runs.EConflict {
		return nil // gone, or another run's by now
	}
	return err
}

// deleteBatch deletes up to 25 keys, resubmitting unprocessed ones with
// backoff.
func (t *Table) deleteBatch(ctx context.Context, keys []map[string]types.AttributeValue) error {
	reqs := make([]types.WriteRequest, len(keys))
	for i, k := range keys {
		reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}}
	}
	backoff := 50 * time.Millisecond
	for attempt := 0; len(reqs) > 0; attempt++ {
		if attempt == 8 {
			return fmt.Errorf("batch delete: %d items left unprocessed", len(reqs))
		}
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff):
			}
			backoff *= 2
		}
		out, err := t.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{t.name: reqs}})
		if err != nil {
			return translate(err)
		}
		reqs = out.UnprocessedItems[t.name]
	}
	return nil
}

// translate maps SDK errors to runs errors: failed conditions and
// transactions cancelled on a condition or a conflict become EConflict;
// anything else, an outcome unknown included, is wrapped as is (internal).
func translate(err error) error {
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return runs.Errorf(runs.EConflict, "condition failed")
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		var codes []string
		conflict := false
		for _, r := range tce.CancellationReasons {
			code := aws.ToString(r.Code)
			codes = append(codes, code)
			if code == "ConditionalCheckFailed" || code == "TransactionConflict" {
				conflict = true
			}
		}
		if conflict || len(codes) == 0 {
			return runs.Errorf(runs.EConflict, "transaction cancelled: %s", strings.Join(codes, ","))
		}
		return fmt.Errorf("transaction cancelled (%s): %w", strings.Join(codes, ","), err)
	}
	var ipm *types.IdempotentParameterMismatchException
	if errors.As(err, &ipm) {
		return runs.Errorf(runs.EConflict, "a different write with the same request token is in flight")
	}
	// TransactionInProgress: a transaction with this write's request token
	// (an earlier attempt of the same write, which the SDK retried) is still
	// running and may yet commit. The outcome is unknown, so it is not a
	// conflict (a 409 to a decision that then takes effect): like a timeout,
	// it is an internal error the caller must not read as "not written".
	var tip *types.TransactionInProgressException
	if errors.As(err, &tip) {
		return fmt.Errorf("dynamodb: an earlier attempt of this write is still in progress, its outcome is unknown: %w", err)
	}
	return fmt.Errorf("dynamodb: %w", err)
}

// pageLimit is n as a Query's Limit, held to the int32 range the API takes.
func pageLimit(n int) *int32 {
	if n < 0 {
		n = 0
	}
	if n > math.MaxInt32 {
		n = math.MaxInt32
	}
	return aws.Int32(int32(n))
}

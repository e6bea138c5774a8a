package rabbitmq

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/backends"
)

// errTree is the text of err and of every error it wraps: a cause kept for
// errors.Is/As must not carry what the message masks.
func errTree(err error) string {
	if err == nil {
		return ""
	}
	out := err.Error()
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		out += "\n" + errTree(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			out += "\n" + errTree(e)
		}
	}
	return out
}

// closedPort is a loopback address nothing listens on: a dial is refused.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// A caller can tell an unreachable server from refused credentials with
// errors.Is, over AMQP and the management API alike, and no error in the
// chain carries the password the message masks.
func TestDialFailuresAreTypedWithoutTheirSecret(t *testing.T) {
	t.Parallel()
	needRabbit(t)
	needManagement(t)
	const secret = "s3cret-pw-typed"
	amqpHost := "127.0.0.1:5672"
	if u, err := url.Parse(amqpURL()); err == nil && u.Host != "" {
		amqpHost = u.Host
	}
	mgmt, err := url.Parse(mgmtURL())
	if err != nil {
		t.Fatal(err)
	}
	mgmt.User = nil
	silent, closed := silentListener(t), closedPort(t)
	for _, tc := range []struct {
		name string
		o    Options
		want error
	}{
		{"amqp silent", Options{AMQPURL: "amqp://berth:" + secret + "@" + silent + "/", Timeout: 300 * time.Millisecond}, backends.ErrUnreachable},
		{"amqp refused", Options{AMQPURL: "amqp://berth:" + secret + "@" + closed + "/"}, backends.ErrUnreachable},
		{"amqp bad password", Options{AMQPURL: "amqp://guest:" + secret + "@" + amqpHost + "/"}, backends.ErrAuth},
		{"management silent", Options{ManagementURL: "http://berth:" + secret + "@" + silent, Timeout: 300 * time.Millisecond}, backends.ErrUnreachable},
		{"management refused", Options{ManagementURL: "http://berth:" + secret + "@" + closed}, backends.ErrUnreachable},
		{"management bad password", Options{ManagementURL: mgmt.String(), Username: "guest", Password: secret}, backends.ErrAuth},
	} {
		if tc.o.Timeout == 0 {
			tc.o.Timeout = 5 * time.Second
		}
		_, err := Dial(context.Background(), tc.o)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v; want errors.Is %v", tc.name, err, tc.want)
			continue
		}
		if tree := errTree(err); strings.Contains(tree, secret) {
			t.Errorf("%s: the error chain carries the password:\n%s", tc.name, tree)
		}
	}
}

// An AMQP URL that does not parse is refused with why, in words, never a
// piece of it: net/url quoted the bad escape ("%PW", part of the
// password), and the hint amqp091 adds held an '@' that made the masking
// swallow the reason.
func TestUnparsableAMQPURLSaysWhyWithoutItsPassword(t *testing.T) {
	for url, why := range map[string]string{
		"amqp://guest:s3cr%Et@127.0.0.1:5672/": "an invalid %-escape",
		"amqp://guest:s3cr%Et@[::1":            "an IPv6 host without its ']'",
		"amqp://guest:s3cr%Et@127.0.0.1:99x/":  "an invalid port",
		"amqp://guest:s3cr3tEt@127.0.0.1:99x/": "an invalid port",
	} {
		_, err := Dial(context.Background(), Options{AMQPURL: url, Timeout: time.Second})
		if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "must be percent-encoded") ||
			strings.Contains(errTree(err), "Et") {
			t.Errorf("%s: %v; want %q and no part of the password", url, err, why)
		}
	}
}

// A missing queue is backends.ErrNotFound with and without the management
// API, and the message still names the queue and vhost.
func TestMissingQueueIsNotFound(t *testing.T) {
	t.Parallel()
	needRabbit(t)
	needManagement(t)
	missing := uniq(t, "missing")
	for _, o := range []Options{
		{AMQPURL: amqpURL(), ManagementURL: mgmtURL()},
		{AMQPURL: amqpURL()},
	} {
		c := testClient(t, o)
		_, err := c.Queue(context.Background(), "", missing)
		if !errors.Is(err, backends.ErrNotFound) || !strings.Contains(err.Error(), `queue "`+missing+`" not found in vhost`) {
			t.Errorf("management %v: Queue(%s) = %v; want ErrNotFound naming the queue", o.ManagementURL != "", missing, err)
		}
		_, err = c.ReadyCount(context.Background(), missing)
		if !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("management %v: ReadyCount(%s) = %v; want ErrNotFound", o.ManagementURL != "", missing, err)
		}
	}
}

// The redrive store keeps its causes too: a caller can tell a cancelled
// command or a missing plan file from a broken store.
func TestStoreErrorsKeepTheirCause(t *testing.T) {
	t.Parallel()
	l, err := OpenLedger(context.Background(), filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Entries(ctx, "p"); !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "ledger: ") {
		t.Errorf("Entries with a cancelled context: %v; want a ledger error that is context.Canceled", err)
	}
	missing := filepath.Join(t.TempDir(), "no-such-plan.json")
	if _, err := ReadPlan(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("ReadPlan of a missing file: %v; want fs.ErrNotExist naming the path", err)
	}
}

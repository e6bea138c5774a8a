package rabbitmq

import (
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Fixtures in the exact shapes amqp091-go decodes (see the probe).
func TestParseDeath(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 7, 0, 4, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	cases := []struct {
		name    string
		headers amqp.Table
		check   func(t *testing.T, d DeathInfo)
	}{
		{"classic rejected", amqp.Table{
			"x-death":                []interface{}{amqp.Table{"count": int64(1), "exchange": "work.x", "queue": "work.classic", "reason": "rejected", "routing-keys": []interface{}{"rk.classic"}, "time": t0}},
			"x-first-death-exchange": "work.x", "x-first-death-queue": "work.classic", "x-first-death-reason": "rejected",
		}, func(t *testing.T, d DeathInfo) {
			x, k, ok := d.Target()
			if !ok || x != "work.x" || k != "rk.classic" || d.Reason() != "rejected" || d.OriginalQueue() != "work.classic" || d.TotalDeaths() != 1 || !d.Deaths[0].Time.Equal(t0) || len(d.Malformed) != 0 {
				t.Errorf("%+v", d)
			}
		}},
		{"expired keeps original expiration", amqp.Table{
			"x-death": []interface{}{amqp.Table{"count": int64(1), "exchange": "", "queue": "q", "reason": "expired", "routing-keys": []interface{}{"q"}, "time": t0, "original-expiration": "50"}},
		}, func(t *testing.T, d DeathInfo) {
			x, k, ok := d.Target()
			if !ok || x != "" || k != "q" || d.Deaths[0].OriginalExpiration != "50" {
				t.Errorf("%+v", d)
			}
		}},
		{"two queues, most recent first; first death kept", amqp.Table{
			"x-death": []interface{}{
				amqp.Table{"count": int64(2), "exchange": "work.x", "queue": "work.classic", "reason": "maxlen", "routing-keys": []interface{}{"a", "b"}, "time": t1},
				amqp.Table{"count": int64(1), "exchange": "work.x", "queue": "work.quorum", "reason": "delivery_limit", "routing-keys": []interface{}{"rk.q"}, "time": t0},
			},
			"x-first-death-queue": "work.quorum", "x-first-death-reason": "delivery_limit", "x-delivery-count": int64(3),
		}, func(t *testing.T, d DeathInfo) {
			x, k, _ := d.Target()
			if d.OriginalQueue() != "work.classic" || d.Reason() != "maxlen" || k != "a" || x != "work.x" || d.TotalDeaths() != 3 || d.FirstDeathQueue != "work.quorum" || d.DeliveryCount == nil || *d.DeliveryCount != 3 {
				t.Errorf("%+v", d)
			}
		}},
		{"malformed values are reported, never fatal", amqp.Table{
			"x-death": []interface{}{"nonsense", amqp.Table{"count": "many", "reason": "boredom", "routing-keys": 7}},
		}, func(t *testing.T, d DeathInfo) {
			if len(d.Deaths) != 1 || len(d.Malformed) != 4 || d.Deaths[0].Count != 1 {
				t.Errorf("deaths %+v malformed %q", d.Deaths, d.Malformed)
			}
			if _, _, ok := d.Target(); ok {
				t.Error("a death with no routing keys has no target")
			}
		}},
		{"x-death not an array", amqp.Table{"x-death": "x"}, func(t *testing.T, d DeathInfo) {
			if d.Dead() || len(d.Malformed) != 1 {
				t.Errorf("%+v", d)
			}
		}},
		{"no headers", nil, func(t *testing.T, d DeathInfo) {
			if d.Dead() || d.Last() != nil || d.Reason() != "" {
				t.Errorf("%+v", d)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.check(t, ParseDeath(c.headers)) })
	}
}

func FuzzParseDeath(f *testing.F) {
	f.Add("rejected", "q", "x", "rk", int64(1), int64(3))
	f.Add("", "", "", "", int64(-1), int64(0))
	f.Fuzz(func(t *testing.T, reason, queue, exchange, key string, count, dc int64) {
		h := amqp.Table{
			"x-death":             []interface{}{amqp.Table{"count": count, "reason": reason, "queue": queue, "exchange": exchange, "routing-keys": []interface{}{key, count}, "time": count}},
			"x-first-death-queue": []byte(queue), "x-delivery-count": fmt.Sprint(dc),
		}
		d := ParseDeath(h)
		if len(d.Deaths) != 1 || d.Deaths[0].Queue != queue || d.FirstDeathQueue != queue {
			t.Fatalf("%+v", d)
		}
		if x, k, ok := d.Target(); !ok || x != exchange || k != key {
			t.Fatalf("target %q %q %v", x, k, ok)
		}
	})
}

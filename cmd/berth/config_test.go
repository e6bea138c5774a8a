package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/berth-dev/berth/internal/kafkatest"
)

func TestConfigViewWithoutFileShowsBundledDefault(t *testing.T) {
	isolateConfig(t)
	out, errOut, code := runBerth(t, "config", "view", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v struct {
		File          string `json:"file"`
		ActiveContext string `json:"active_context"`
		Context       struct {
			Kind      string   `json:"kind"`
			Bootstrap []string `json:"bootstrap"`
		} `json:"context"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if v.File != "" || v.ActiveContext != "bundled" || v.Context.Kind != "bundled" || len(v.Context.Bootstrap) != 1 || v.Context.Bootstrap[0] != "127.0.0.1:9092" {
		t.Fatalf("config view without a file = %+v, want the bundled context on 127.0.0.1:9092", v)
	}
}

// fullConfig has a context of every kind, TLS and SASL, group policies and
// lag settings. The SASL password lives in a file; the AMQP URL carries one.
const fullConfig = `# Berth configuration
current_context: local
contexts:
  local:
    kind: bundled
    bootstrap: [127.0.0.1:9092]
  prod:
    kind: kafka
    bootstrap: [kafka-1.prod:9093, kafka-2.prod:9093]
    read_only: true
    tls:
      enabled: true
      ca_file: /etc/berth/prod-ca.pem
    sasl:
      mechanism: SCRAM-SHA-512
      username: berth-ops
      password_file: PASSFILE
  Rabbit:
    kind: rabbitmq
    amqp_url: amqp://ops:amqp-s3cret@rabbit.prod:5672/
    management_url: http://rabbit.prod:15672
lag:
  default_slo: 2m
  window: 90s
groups:
  - match: payments-*
    slo: 30s
    effects: true
  - match: sales-*
    slo: 1h
`

func writeFullConfig(t *testing.T) (path, passFile string) {
	t.Helper()
	passFile = filepath.Join(t.TempDir(), "sasl-password")
	if err := os.WriteFile(passFile, []byte("sasl-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return writeConfig(t, strings.ReplaceAll(fullConfig, "PASSFILE", passFile)), passFile
}

func TestConfigViewMasksSecretsAndReadsWell(t *testing.T) {
	isolateConfig(t)
	path, passFile := writeFullConfig(t)
	yamlOut, errOut, code := runBerth(t, "--config", path, "config", "view")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	jsonOut, errOut, code := runBerth(t, "--config", path, "config", "view", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, out := range []string{yamlOut, jsonOut} {
		if strings.Contains(out, "amqp-s3cret") || strings.Contains(out, "sasl-s3cret") {
			t.Fatalf("a secret reached config view:\n%s", out)
		}
		// Where the password lives is shown; the context name keeps its case.
		if !strings.Contains(out, passFile) || !strings.Contains(out, "Rabbit") || !strings.Contains(out, "amqp://ops:*****@rabbit.prod:5672/") {
			t.Fatalf("config view lacks the password file, the Rabbit context or the masked URL:\n%s", out)
		}
	}
	// YAML leaves out empty fields and writes durations as in the file.
	for _, want := range []string{"file: " + path, "active_context: local", "default_slo: 2m\n", "window: 1m30s\n", "slo: 30s\n"} {
		if !strings.Contains(yamlOut, want) {
			t.Errorf("YAML view lacks %q:\n%s", want, yamlOut)
		}
	}
	for _, absent := range []string{"ca_file: \"\"", "data_dir", "queues: []", "skip_verify: false"} {
		if strings.Contains(yamlOut, absent) {
			t.Errorf("YAML view shows empty field %q:\n%s", absent, yamlOut)
		}
	}
	// JSON keeps every field, and is stable from run to run.
	var v struct {
		Config struct {
			Contexts map[string]struct {
				ReadOnly bool `json:"read_only"`
				TLS      struct {
					SkipVerify bool   `json:"skip_verify"`
					CAFile     string `json:"ca_file"`
				} `json:"tls"`
			} `json:"contexts"`
			Lag struct {
				DefaultSLO string `json:"default_slo"`
			} `json:"lag"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(jsonOut), &v); err != nil {
		t.Fatal(err)
	}
	if p := v.Config.Contexts["prod"]; !p.ReadOnly || p.TLS.CAFile != "/etc/berth/prod-ca.pem" || v.Config.Lag.DefaultSLO != "2m" {
		t.Fatalf("JSON view = %+v", v)
	}
	if !strings.Contains(jsonOut, `"skip_verify": false`) {
		t.Errorf("JSON view should keep false fields:\n%s", jsonOut)
	}
	again, _, _ := runBerth(t, "--config", path, "config", "view", "-o", "json")
	if again != jsonOut {
		t.Error("config view -o json differs between two runs")
	}
}

func TestConfigErrorsNameFileLineAndField(t *testing.T) {
	isolateConfig(t)
	cases := []struct {
		name, yaml string
		args       []string
		want       []string
	}{
		{"malformed", "contexts:\n  prod\n    kind: kafka\n", nil, []string{"line 3", "mapping values"}},
		{"unknown key", "contexts:\n  prod:\n    kind: kafka\n    bootstrapp: [h:1]\n", nil, []string{"line 4", `unknown field "bootstrapp"`}},
		{"bad duration", "refresh: soon\n", nil, []string{"line 1", "refresh", `"soon" is not a duration`}},
		{"invalid value", "contexts:\n  prod:\n    kind: nats\n", nil, []string{"contexts.prod.kind", "nats"}},
		{"unknown current", "current_context: staging\ncontexts:\n  prod:\n    bootstrap: [h:1]\n", nil, []string{"current_context", `"staging"`, "have: prod"}},
		{"unknown --context", "contexts:\n  prod:\n    bootstrap: [h:1]\n", []string{"--context", "qa"}, []string{`unknown context "qa"`, "have: prod"}},
		{"no current context", "contexts:\n  a:\n    bootstrap: [h:1]\n  b:\n    bootstrap: [h:2]\n", nil, []string{"no current context", "have: a, b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.yaml)
			args := append([]string{"--config", path}, tc.args...)
			_, errOut, code := runBerth(t, append(args, "brokers")...)
			if code == 0 {
				t.Fatal("succeeded")
			}
			if !strings.HasPrefix(errOut, "berth: "+path+": ") || strings.Count(errOut, "\n") != 1 {
				t.Errorf("want one line naming the file, got %q", errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("error %q lacks %q", errOut, w)
				}
			}
		})
	}
	if _, errOut, code := runBerth(t, "--config", filepath.Join(t.TempDir(), "missing.yaml"), "topics"); code != 1 || !strings.Contains(errOut, "missing.yaml: config file not found") {
		t.Errorf("missing --config file: exit %d, %q", code, errOut)
	}
}

func TestUseContextSwitchesAndKeepsTheFile(t *testing.T) {
	defPath := isolateConfig(t)
	if err := os.MkdirAll(filepath.Dir(defPath), 0o755); err != nil {
		t.Fatal(err)
	}
	body := "# my clusters\ncurrent_context: a\ncontexts:\n  a:\n    bootstrap: [h:1] # first\n  b:\n    bootstrap: [h:2]\n"
	if err := os.WriteFile(defPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runBerth(t, "config", "use-context", "b")
	if code != 0 || !strings.Contains(out, "current context is now b") {
		t.Fatalf("use-context: exit %d %s %s", code, out, errOut)
	}
	raw, _ := os.ReadFile(defPath)
	if !strings.Contains(string(raw), "current_context: b") || !strings.Contains(string(raw), "# my clusters") || !strings.Contains(string(raw), "# first") {
		t.Fatalf("file after use-context:\n%s", raw)
	}
	out, _, _ = runBerth(t, "config", "view", "-o", "json")
	if !strings.Contains(out, `"active_context": "b"`) {
		t.Fatalf("view after use-context:\n%s", out)
	}
	_, errOut, code = runBerth(t, "config", "use-context", "zzz")
	if code != 1 || !strings.Contains(errOut, `unknown context "zzz"`) || !strings.Contains(errOut, defPath) {
		t.Fatalf("unknown context: exit %d %q", code, errOut)
	}
	raw2, _ := os.ReadFile(defPath)
	if string(raw2) != string(raw) {
		t.Fatal("a refused use-context changed the file")
	}
	if _, _, code := runBerth(t, "config", "use-context"); code != 2 {
		t.Fatalf("use-context without a name: exit %d, want 2", code)
	}

	// With several contexts and no current one, commands ask for a choice
	// and use-context (and view) still work to make it.
	os.WriteFile(defPath, []byte("contexts:\n  a:\n    bootstrap: [h:1]\n  b:\n    bootstrap: [h:2]\n"), 0o600)
	if _, errOut, code := runBerth(t, "topics"); code != 1 || !strings.Contains(errOut, "no current context") {
		t.Fatalf("no current context: exit %d %q", code, errOut)
	}
	if out, errOut, code := runBerth(t, "config", "view"); code != 0 || !strings.Contains(out, `active_context: ""`) {
		t.Fatalf("config view with no current context: exit %d %s\n%s", code, errOut, out)
	}
	if _, errOut, code := runBerth(t, "config", "use-context", "a"); code != 0 {
		t.Fatalf("use-context with no current context: exit %d %s", code, errOut)
	}
	if out, _, _ := runBerth(t, "config", "view", "-o", "json"); !strings.Contains(out, `"active_context": "a"`) {
		t.Fatalf("after use-context a:\n%s", out)
	}
}

func TestEnvironmentOverridesFileAndFlagsOverrideEnvironment(t *testing.T) {
	defPath := isolateConfig(t)
	if err := os.MkdirAll(filepath.Dir(defPath), 0o755); err != nil {
		t.Fatal(err)
	}
	body := "current_context: a\ncontexts:\n  a:\n    bootstrap: [h:1]\n  b:\n    bootstrap: [h:2]\n"
	if err := os.WriteFile(defPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	type view struct {
		ActiveContext string `json:"active_context"`
		ReadOnly      bool   `json:"read_only"`
		Timeout       string `json:"timeout"`
		Context       struct {
			Bootstrap []string `json:"bootstrap"`
		} `json:"context"`
	}
	get := func(args ...string) view {
		t.Helper()
		out, errOut, code := runBerth(t, append([]string{"config", "view"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var v view
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return v
	}

	t.Setenv("BERTH_OUTPUT", "json")
	t.Setenv("BERTH_CONTEXT", "b")
	t.Setenv("BERTH_TIMEOUT", "3s")
	t.Setenv("BERTH_READ_ONLY", "true")
	v := get()
	if v.ActiveContext != "b" || v.Timeout != "3s" || !v.ReadOnly || v.Context.Bootstrap[0] != "h:2" {
		t.Fatalf("environment not applied: %+v", v)
	}
	// Flags beat the environment.
	v = get("--context", "a", "--timeout", "7s", "--read-only=false")
	if v.ActiveContext != "a" || v.Timeout != "7s" || v.ReadOnly {
		t.Fatalf("flags did not override the environment: %+v", v)
	}
	// BERTH_BOOTSTRAP with a chosen context replaces its servers.
	t.Setenv("BERTH_BOOTSTRAP", "k1:9092,k2:9092")
	if v = get(); v.ActiveContext != "b" || strings.Join(v.Context.Bootstrap, ",") != "k1:9092,k2:9092" {
		t.Fatalf("BERTH_BOOTSTRAP with BERTH_CONTEXT: %+v", v)
	}
	// Without a chosen context it is an ad-hoc cluster.
	os.Unsetenv("BERTH_CONTEXT")
	if v = get(); v.ActiveContext != "adhoc" || strings.Join(v.Context.Bootstrap, ",") != "k1:9092,k2:9092" {
		t.Fatalf("BERTH_BOOTSTRAP alone: %+v", v)
	}

	// Bad values are usage errors naming the variable.
	t.Setenv("BERTH_TIMEOUT", "soon")
	if _, errOut, code := runBerth(t, "config", "view"); code != 2 || !strings.Contains(errOut, `BERTH_TIMEOUT: "soon"`) {
		t.Fatalf("bad BERTH_TIMEOUT: exit %d %q", code, errOut)
	}
	t.Setenv("BERTH_TIMEOUT", "")
	t.Setenv("BERTH_READ_ONLY", "maybe")
	if _, errOut, code := runBerth(t, "config", "view"); code != 2 || !strings.Contains(errOut, `BERTH_READ_ONLY: "maybe"`) {
		t.Fatalf("bad BERTH_READ_ONLY: exit %d %q", code, errOut)
	}
	t.Setenv("BERTH_READ_ONLY", "")
	t.Setenv("BERTH_CONTEXT", "nope")
	if _, errOut, code := runBerth(t, "config", "view"); code != 1 || !strings.Contains(errOut, `unknown context "nope"`) {
		t.Fatalf("unknown BERTH_CONTEXT: exit %d %q", code, errOut)
	}
	t.Setenv("BERTH_CONTEXT", "")

	// BERTH_CONFIG picks the file; --bootstrap with a chosen context keeps
	// that context's SASL settings.
	other := writeConfig(t, "contexts:\n  sec:\n    bootstrap: [s:1]\n    sasl: {mechanism: PLAIN, username: u, password_env: X}\n")
	t.Setenv("BERTH_CONFIG", other)
	t.Setenv("BERTH_BOOTSTRAP", "")
	out, errOut, code := runBerth(t, "config", "view", "-c", "sec", "--bootstrap", "tunnel:19092")
	if code != 0 || !strings.Contains(out, `"active_context": "sec"`) || !strings.Contains(out, `"tunnel:19092"`) || !strings.Contains(out, `"mechanism": "PLAIN"`) {
		t.Fatalf("BERTH_CONFIG with -c and --bootstrap: exit %d %s\n%s", code, errOut, out)
	}
	t.Setenv("BERTH_CONFIG", "")

	t.Setenv("BERTH_OUTPUT", "xml")
	if _, errOut, code := runBerth(t, "brokers"); code != 2 || !strings.Contains(errOut, `"xml"`) {
		t.Fatalf("BERTH_OUTPUT=xml: exit %d %q", code, errOut)
	}
}

func TestSASLPasswordFromFileAndNeverPrinted(t *testing.T) {
	isolateConfig(t)
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			kc := kafkatest.Start(t, 1, kfake.EnableSASL(), kfake.Superuser(mech, "ops", "right-s3cret"))
			pass := filepath.Join(t.TempDir(), "pass")
			cfg := "contexts:\n  secure:\n    kind: kafka\n    bootstrap: [" + kc.Addrs[0] + "]\n    sasl:\n      mechanism: " + mech +
				"\n      username: ops\n      password_file: " + pass + "\n"
			path := writeConfig(t, cfg)

			os.WriteFile(pass, []byte("right-s3cret\n"), 0o600)
			out, errOut, code := runBerth(t, "--config", path, "brokers", "-o", "json")
			if code != 0 || !strings.Contains(out, `"brokers"`) {
				t.Fatalf("with the right password: exit %d %s", code, errOut)
			}

			os.WriteFile(pass, []byte("wrong-s3cret\n"), 0o600)
			out, errOut, code = runBerth(t, "--config", path, "--timeout", "3s", "brokers")
			// Named as an authentication failure with the mechanism and
			// user, not the bare EOF the broker's hang-up gives.
			if want := "berth: kafka " + kc.Addrs[0] + ": authentication failed (" + mech + ", user ops)\n"; code != 1 || !strings.HasSuffix(errOut, want) {
				t.Fatalf("with a wrong password: exit %d %q", code, errOut)
			}
			if strings.Contains(out+errOut, "s3cret") {
				t.Fatalf("password printed: %q %q", out, errOut)
			}
			view, _, _ := runBerth(t, "--config", path, "config", "view")
			if strings.Contains(view, "s3cret") {
				t.Fatalf("password in config view:\n%s", view)
			}
		})
	}

	// A password file that cannot be read is named; nothing is dialled.
	path := writeConfig(t, "contexts:\n  s:\n    bootstrap: [127.0.0.1:1]\n    sasl:\n      mechanism: PLAIN\n      username: u\n      password_env: BERTH_TEST_NO_SUCH_VAR\n")
	_, errOut, code := runBerth(t, "--config", path, "brokers")
	if code != 1 || !strings.Contains(errOut, "contexts.s.sasl.password_env") || !strings.Contains(errOut, "BERTH_TEST_NO_SUCH_VAR") {
		t.Fatalf("missing password variable: exit %d %q", code, errOut)
	}
}

func TestCredentialsInURLsNeverReachErrors(t *testing.T) {
	isolateConfig(t)
	_, errOut, code := runBerth(t, "--bootstrap", "amqp://ops:url-s3cret@127.0.0.1:1", "--timeout", "1s", "brokers")
	if code == 0 || strings.Contains(errOut, "url-s3cret") || !strings.Contains(errOut, "ops:*****@") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestTLSWithCAFile(t *testing.T) {
	isolateConfig(t)
	caPEM, serverCert := selfSignedTLS(t)
	kc := kafkatest.Start(t, 1, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}}))
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, caPEM, 0o600)

	withCA := writeConfig(t, "contexts:\n  tls:\n    bootstrap: ["+kc.Addrs[0]+"]\n    tls:\n      ca_file: "+ca+"\n")
	if _, errOut, code := runBerth(t, "--config", withCA, "brokers"); code != 0 {
		t.Fatalf("TLS with the CA: exit %d %s", code, errOut)
	}
	// Without the CA the server is not trusted; the error names the address.
	noCA := writeConfig(t, "contexts:\n  tls:\n    bootstrap: ["+kc.Addrs[0]+"]\n    tls:\n      enabled: true\n")
	_, errOut, code := runBerth(t, "--config", noCA, "--timeout", "2s", "brokers")
	if code != 1 || !strings.Contains(errOut, kc.Addrs[0]) {
		t.Fatalf("TLS without the CA: exit %d %q", code, errOut)
	}
	skip := writeConfig(t, "contexts:\n  tls:\n    bootstrap: ["+kc.Addrs[0]+"]\n    tls:\n      skip_verify: true\n")
	if _, errOut, code := runBerth(t, "--config", skip, "brokers"); code != 0 {
		t.Fatalf("TLS with skip_verify: exit %d %s", code, errOut)
	}
	badCA := writeConfig(t, "contexts:\n  tls:\n    bootstrap: ["+kc.Addrs[0]+"]\n    tls:\n      ca_file: "+filepath.Join(t.TempDir(), "nope.pem")+"\n")
	if _, errOut, code := runBerth(t, "--config", badCA, "brokers"); code != 1 || !strings.Contains(errOut, "contexts.tls.tls.ca_file") {
		t.Fatalf("missing CA file: exit %d %q", code, errOut)
	}
}

// selfSignedTLS makes a CA and a server certificate for 127.0.0.1 signed by it.
func selfSignedTLS(t *testing.T) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "berth test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

package dlockprom_test

import (
	"os"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The alert rules are valid, fire on the series of alerts_test.yml as it expects, and
// query only metrics that the Collector exports (a renamed metric would leave a rule that
// never fires, and alerts_test.yml, which names its own series, would not notice).
func TestAlertRules(t *testing.T) {
	runPromtool(t, ".", "check", "rules", "alerts.yml")
	runPromtool(t, ".", "test", "rules", "alerts_test.yml")

	var file struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr string
			}
		}
	}
	data, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	exported := exportedNames(t)
	rules := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			rules++
			checkQuery(t, "alert "+r.Alert, r.Expr, exported)
		}
	}
	if rules == 0 {
		t.Fatal("alerts.yml has no rules")
	}
}

// checkQuery fails the test unless expr selects at least one metric, and only metrics in
// exported.
func checkQuery(t *testing.T, where, expr string, exported map[string]bool) {
	t.Helper()
	names := metricNames(expr)
	if len(names) == 0 {
		t.Errorf("%s: the query %q selects no metric", where, expr)
	}
	for _, name := range names {
		if !exported[name] {
			t.Errorf("%s: the query %q selects %s, which the Collector does not export", where, expr, name)
		}
	}
}

//! Kubernetes JSONPath behaviour (cases mirror client-go's own expectations) and printer
//! column cells.
#![allow(clippy::unwrap_used)]

use flotilla_schema::jsonpath::{JsonPath, cell, cell_at, human_duration};
use serde_json::{Value, json};

fn store() -> Value {
    json!({
        "name": "jsonpath",
        "book": [
            {"category": "reference", "author": "Nigel Rees", "title": "Sayings of the Centurey", "price": 8.95},
            {"category": "fiction", "author": "Evelyn Waugh", "title": "Sword of Honour", "price": 12.99},
            {"category": "fiction", "author": "Herman Melville", "title": "Moby Dick", "price": 8.99}
        ],
        "bicycle": [
            {"color": "red", "price": 19.95, "isNew": true},
            {"color": "green", "price": 20.01, "isNew": false}
        ],
        "labels": {"engineer": 10, "web/html": 15, "k8s-app": 20, "a.b": 1},
        "count": 3
    })
}

fn exec(template: &str, data: &Value) -> Result<String, String> {
    JsonPath::parse_template(template)
        .map_err(|e| e.0)?
        .execute(data, false)
        .map_err(|e| e.0)
}

#[test]
fn templates() {
    let data = store();
    let cases: &[(&str, Value, &str)] = &[
        ("hello jsonpath", Value::Null, "hello jsonpath"),
        ("{..}", json!([1, 2, 3]), "[1,2,3]"),
        ("{[?(@<5)]}", json!([2, 6, 3, 7]), "2 3"),
        (r#"{"{"}"#, Value::Null, "{"),
        ("{[1,3,4]}", json!([0, 1, 2, 3, 4]), "1 3 4"),
        (
            "{[0:2]}",
            json!(["Monday", "Tuesday", "Wednesday"]),
            "Monday Tuesday",
        ),
        ("hello {.name}", data.clone(), "hello jsonpath"),
        ("{$.labels.web/html}", data.clone(), "15"),
        ("{.labels.k8s-app}", data.clone(), "20"),
        // Dots in keys need escaping, even inside ['...'] (client-go re-parses the key as a path).
        (r"{.labels['a\.b']}", data.clone(), "1"),
        (r"{.labels.a\.b}", data.clone(), "1"),
        ("{.labels['k8s-app']}", data.clone(), "20"),
        ("{.bicycle[*].color}", data.clone(), "red green"),
        (
            "{.book[*].author}",
            data.clone(),
            "Nigel Rees Evelyn Waugh Herman Melville",
        ),
        (
            r#"{range .bicycle[*]}{ "{" }{ @.color }{ "} " }{end}"#,
            data.clone(),
            "{red} {green} ",
        ),
        // Map entries are visited in key order (Go's is random), so bicycles come before books.
        ("{..price}", data.clone(), "19.95 20.01 8.95 12.99 8.99"),
        ("{...price}", data.clone(), "19.95 20.01 8.95 12.99 8.99"),
        ("{.book[-1:].title}", data.clone(), "Moby Dick"),
        ("{.book[-1].title}", data.clone(), "Moby Dick"),
        ("{.book[1:3].title}", data.clone(), "Sword of Honour Moby Dick"),
        (
            "{.book[0:3:2].title}",
            data.clone(),
            "Sayings of the Centurey Moby Dick",
        ),
        ("{..book[2].author}", data.clone(), "Herman Melville"),
        ("{.bicycle[?(@.isNew==true)].color}", data.clone(), "red"),
        (
            "{.book[?(@.price<9.0)].title}",
            data.clone(),
            "Sayings of the Centurey Moby Dick",
        ),
        ("{.book[?(@.price>=12.99)].author}", data.clone(), "Evelyn Waugh"),
        (
            "{.book[?(@.category!=\"fiction\")].author}",
            data.clone(),
            "Nigel Rees",
        ),
        ("{.book[?(@.isbn)].author}", data.clone(), ""),
        ("{.bicycle[?(@.isNew)].color}", data.clone(), "red green"),
        ("{.labels.*}", json!({"labels": {"b": 2, "a": 1}}), "1 2"),
        (
            "{.bicycle[0]}",
            data.clone(),
            r#"{"color":"red","isNew":true,"price":19.95}"#,
        ),
        ("{.book[1:1]}", data.clone(), ""),
        ("{.count}", data.clone(), "3"),
        ("{.name}{\"\\n\"}", data.clone(), "jsonpath\n"),
    ];
    for (template, input, want) in cases {
        assert_eq!(exec(template, input).as_deref(), Ok(*want), "{template}");
    }
}

#[test]
fn evaluation_errors() {
    let data = store();
    let cases: &[(&str, &str)] = &[
        ("{.hello}", "hello is not found"),
        ("{.book[5]}", "array index out of bounds: index 5, length 3"),
        ("{.book[-4]}", "array index out of bounds: index -1, length 3"),
        ("{.book[2:1]}", "starting index 2 is greater than ending index 1"),
        ("{.book[0:2:0]}", "step must be > 0"),
        ("{.name[0]}", "string is not array or slice"),
        ("{.bicycle[?(@.isNew<true)]}", "invalid type for comparison"),
        ("{.book[?(@.price==9)]}", "incompatible types for comparison"),
        (
            "{.name[?(@.x==1)]}",
            "jsonpath is not array or slice and cannot be filtered",
        ),
        ("{end}", "not in range, nothing to end"),
        ("{foo}", "unrecognized identifier foo"),
        ("{.labels['a.b']}", "a is not found"),
    ];
    for (template, want) in cases {
        assert_eq!(exec(template, &data), Err(want.to_string()), "{template}");
    }
    // Missing keys are fine when allowed.
    let p = JsonPath::parse_template("before-{.hello}after").unwrap();
    assert_eq!(p.execute(&data, true).unwrap(), "before-after");
}

#[test]
fn parse_errors() {
    let cases = [
        ("{.a", "unclosed action"),
        ("{.a[1}", "unterminated array"),
        ("{.a[x]}", "invalid array index x"),
        ("{.a[?(@.b}", "unterminated filter"),
        ("{....a}", "invalid multiple recursive descent"),
        ("{#}", "unrecognized character in action: U+0023 '#'"),
    ];
    for (expr, want) in cases {
        assert_eq!(JsonPath::parse_template(expr).unwrap_err().0, want, "{expr}");
    }
}

#[test]
fn relaxed_expressions() {
    let data = json!({"status": {"phase": "Running"}});
    assert_eq!(
        JsonPath::parse(".status.phase").unwrap().find(&data),
        vec![json!("Running")]
    );
    assert_eq!(
        JsonPath::parse("status.phase").unwrap().find(&data),
        vec![json!("Running")]
    );
    assert_eq!(
        JsonPath::parse("{.status.phase}").unwrap().find(&data),
        vec![json!("Running")]
    );
    assert!(JsonPath::parse(".missing").unwrap().find(&data).is_empty());
}

#[test]
fn cells() {
    let obj = json!({
        "spec": {"replicas": 3, "ratio": 1.5, "paused": true, "items": [{"k": "A"}, {"k": "B"}], "empty": null},
        "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}]},
        "metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"}
    });
    let now = 1_704_067_200 + 3 * 86_400 + 4 * 3600; // 3 days 4 hours later
    let c = |path: &str, ty: &str| {
        let p = JsonPath::parse_column(path).unwrap();
        let results = p.find_results(&obj, true).unwrap_or_default();
        cell_at(results.first().map(Vec::as_slice).unwrap_or(&[]), ty, now)
    };
    assert_eq!(c(".spec.replicas", "integer"), json!(3));
    assert_eq!(c(".spec.ratio", "integer"), json!(1));
    assert_eq!(c(".spec.replicas", "number"), json!(3.0));
    assert_eq!(c(".spec.replicas", "string"), json!("3"));
    assert_eq!(c(".spec.paused", "boolean"), json!(true));
    assert_eq!(c(".spec.paused", "string"), json!("true"));
    assert_eq!(c(".spec.replicas", "boolean"), Value::Null);
    assert_eq!(
        c(".spec.items[*].k", "string"),
        json!("A"),
        "only the first result counts"
    );
    assert_eq!(c(".spec.items", "string"), json!(r#"[{"k":"A"},{"k":"B"}]"#));
    assert_eq!(c(".spec.empty", "string"), json!("<no value>"));
    assert_eq!(c(".spec.empty", "integer"), Value::Null);
    assert_eq!(c(".spec.missing", "string"), Value::Null);
    assert_eq!(
        c(r#".status.conditions[?(@.type=="Synced")].status"#, "string"),
        json!("False")
    );
    assert_eq!(c(".metadata.creationTimestamp", "date"), json!("3d4h"));
    assert_eq!(c(".spec.items[*].k", "date"), json!("<invalid>"));
    // A path error gives an empty cell.
    assert_eq!(c(".spec.items[7]", "string"), Value::Null);
    // The convenience form evaluates the path itself.
    assert_eq!(
        JsonPath::parse_column(".spec.replicas")
            .unwrap()
            .cell(&obj, "integer"),
        json!(3)
    );
    assert_eq!(cell(&[], "string"), Value::Null);
}

#[test]
fn human_durations() {
    let cases = [
        (-5, "<invalid>"),
        (-1, "0s"),
        (59, "59s"),
        (119, "119s"),
        (120, "2m"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60, "3h1m"),
        (9 * 3600, "9h"),
        (50 * 3600, "2d2h"),
        (10 * 86_400, "10d"),
        (800 * 86_400, "2y70d"),
        (3000 * 86_400, "8y"),
    ];
    for (secs, want) in cases {
        assert_eq!(human_duration(secs), want, "{secs}");
    }
}

//! The Redis store under failure, against a real server killed and restarted by this test (by
//! the pid it started): a clear error when Redis is down, an error within the timeout when it
//! goes away mid-request, recovery when it returns, a commit cut short and retried without
//! duplicates; and credentials and TLS passed through without the password ever shown.

mod common;

use common::{free_port, RedisServer};
use lector_index::{
    Document, DocumentStore, Error, IndexSettings, Mode, SearchOptions, StoreWriter,
};
use lector_redis::{ConnectOptions, RedisStore, RedisWriter, StoreUrl};
use std::process::Command;
use std::time::{Duration, Instant};

fn quick() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(2),
        ca_cert: None,
    }
}

fn writer(url: &StoreUrl, options: &ConnectOptions) -> RedisWriter {
    let settings = IndexSettings::default();
    common::bm25_writer(url, options, settings).unwrap()
}

fn doc(i: usize) -> Document {
    Document::new(
        format!("doc-{i}"),
        format!(
            "Document {i} is about topic{} and the number {i}. It has a second sentence.",
            i % 7
        ),
    )
}

fn bm25(store: &RedisStore, query: &str) -> lector_index::Result<Vec<lector_index::Hit>> {
    let options = SearchOptions::for_index(store, Mode::Bm25);
    store.retriever(&options, None)?.retrieve(query, 5)
}

#[test]
fn redis_down_at_start_is_an_error_naming_the_url_without_its_password() {
    let port = free_port();
    let url = StoreUrl::parse(&format!("redis://app:s3cret-pw@127.0.0.1:{port}/docs")).unwrap();
    let err = RedisStore::open(&url, &quick()).err().unwrap();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("redis://app:***@127.0.0.1:{port}/docs")),
        "{text}"
    );
    assert!(!text.contains("s3cret-pw") && !format!("{err:?}").contains("s3cret-pw"));
}

#[test]
fn a_store_answers_503_material_while_redis_is_gone_and_recovers_when_it_returns() {
    let mut server = RedisServer::start(&[]);
    let url = StoreUrl::parse(&server.url("recover")).unwrap();
    let mut w = writer(&url, &quick());
    for i in 0..20 {
        w.add(doc(i)).unwrap();
    }
    w.commit(&mut |_, _| {}).unwrap();
    let store = RedisStore::open(&url, &quick()).unwrap();
    let before = bm25(&store, "topic3").unwrap();
    assert!(!before.is_empty());

    server.kill();
    let start = Instant::now();
    let err = bm25(&store, "topic3").unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    // Still down: the next request fails the same way (a new connection is refused).
    assert!(matches!(
        bm25(&store, "topic3"),
        Err(Error::Unavailable { .. })
    ));

    server.restart();
    // A restarted Redis first loads its data and says so (unavailable, "loading"): the same
    // store serves again once it has, without being opened anew.
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        match bm25(&store, "topic3") {
            Ok(hits) => break hits,
            Err(Error::Unavailable { reason, .. })
                if reason.contains("loading") && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(err) => panic!("the same store reconnects: {err:?}"),
        }
    };
    assert_eq!(after, before, "what was acknowledged survives the restart");
}

#[test]
fn a_commit_cut_short_is_retried_without_duplicates() {
    let mut server = RedisServer::start(&[]);
    let url = StoreUrl::parse(&server.url("retry")).unwrap();
    let docs: Vec<Document> = (0..1500).map(doc).collect();
    let mut w = writer(&url, &quick());
    for d in &docs {
        w.add(d.clone()).unwrap();
    }
    // Kill Redis as soon as the first transaction of the commit has landed.
    let watcher = RedisStore::open(&url, &quick()).unwrap();
    let pid = server.pid();
    let killer = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if watcher.counts().is_ok_and(|c| c.documents > 0) {
                Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status()
                    .unwrap();
                return true;
            }
        }
        false
    });
    let first = w.commit(&mut |_, _| {});
    assert!(killer.join().unwrap(), "the commit wrote something");
    server.restart();
    match first {
        Err(err) => {
            assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
            eprintln!("commit cut short: {err}");
            assert_eq!(
                w.pending(),
                docs.len(),
                "a failed commit keeps what it staged"
            );
            // Retried once Redis answers again (a restarted Redis first loads its data, and
            // says so: unavailable, with a reason of bounded length).
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                match RedisStore::open(&url, &quick()).and_then(|s| s.counts()) {
                    Ok(_) => break,
                    Err(err) => {
                        assert!(err.to_string().len() < 1_000, "{err}");
                        assert!(Instant::now() < deadline, "Redis did not come back: {err}");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
            w.commit(&mut |_, _| {}).expect("the retry succeeds");
        }
        Ok(_) => eprintln!("the commit finished before Redis was killed"),
    }
    let store = RedisStore::open(&url, &quick()).unwrap();
    let counts = store.counts().unwrap();
    assert_eq!(counts.documents, docs.len());
    let passages: usize = (docs.iter())
        .map(|d| lector_index::docstore::passages_of(d, IndexSettings::default().chunking).len())
        .sum();
    assert_eq!(counts.passages, passages, "no passage twice");
    let hits = bm25(&store, "number 1234").unwrap();
    assert_eq!(hits[0].doc_id, "doc-1234");
}

#[test]
fn passwords_and_tls_pass_through_and_the_password_is_never_shown() {
    let server = RedisServer::start(&["--requirepass", "s3cret-pw"]);
    let wrong =
        StoreUrl::parse(&format!("redis://:wrong-pw@127.0.0.1:{}/auth", server.port)).unwrap();
    let err = common::bm25_writer(&wrong, &quick(), IndexSettings::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("redis://:***@127.0.0.1") && !err.contains("wrong-pw"),
        "{err}"
    );
    let right = StoreUrl::parse(&format!(
        "redis://default:s3cret-pw@127.0.0.1:{}/auth",
        server.port
    ))
    .unwrap();
    let mut w = writer(&right, &quick());
    w.add(doc(1)).unwrap();
    w.commit(&mut |_, _| {}).unwrap();
    let store = RedisStore::open(&right, &quick()).unwrap();
    assert_eq!(
        store.location(),
        format!("redis://default:***@127.0.0.1:{}/auth", server.port)
    );

    // TLS with a private certificate authority.
    let certs = tempfile::tempdir().unwrap();
    let path = |name: &str| certs.path().join(name).to_string_lossy().into_owned();
    let openssl = |args: &[&str]| {
        let ok = Command::new("openssl").args(args).output().unwrap();
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=lector test CA",
        "-keyout",
        &path("ca.key"),
        "-out",
        &path("ca.pem"),
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        &path("server.key"),
        "-out",
        &path("server.csr"),
    ]);
    std::fs::write(path("san.ext"), "subjectAltName=DNS:localhost\n").unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        &path("server.csr"),
        "-CA",
        &path("ca.pem"),
        "-CAkey",
        &path("ca.key"),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        &path("san.ext"),
        "-out",
        &path("server.pem"),
    ]);
    let tls = RedisServer::start_tls(&[
        "--tls-cert-file",
        &path("server.pem"),
        "--tls-key-file",
        &path("server.key"),
        "--tls-ca-cert-file",
        &path("ca.pem"),
        "--tls-auth-clients",
        "no",
        "--requirepass",
        "s3cret-pw",
    ]);
    let url = StoreUrl::parse(&format!(
        "rediss://default:s3cret-pw@localhost:{}/tls",
        tls.port
    ))
    .unwrap();
    let trusted = ConnectOptions {
        ca_cert: Some(path("ca.pem").into()),
        ..quick()
    };
    let mut w = common::bm25_writer(&url, &trusted, IndexSettings::default()).unwrap();
    w.add(doc(2)).unwrap();
    w.commit(&mut |_, _| {}).unwrap();
    let store = RedisStore::open(&url, &trusted).unwrap();
    assert_eq!(bm25(&store, "number 2").unwrap()[0].doc_id, "doc-2");
    // Without the private authority the server's certificate is refused.
    let err = RedisStore::open(&url, &quick()).err().unwrap().to_string();
    assert!(
        err.contains("rediss://default:***@localhost") && !err.contains("s3cret-pw"),
        "{err}"
    );
}

#[test]
fn writers_creating_one_store_at_once_all_succeed() {
    // Parallel Ray shards open the same new store at the same moment: whichever FT.CREATE comes
    // second must reuse the index, not fail.
    let server = RedisServer::start(&[]);
    for round in 0..5 {
        let url = StoreUrl::parse(&server.url(&format!("race{round}"))).unwrap();
        let start = std::sync::Arc::new(std::sync::Barrier::new(4));
        let writers: Vec<_> = (0..4)
            .map(|i| {
                let (url, start) = (url.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let mut w = writer(&url, &quick());
                    w.add(doc(round * 10 + i)).unwrap();
                    w.commit(&mut |_, _| {}).map(|_| ())
                })
            })
            .collect();
        for w in writers {
            w.join()
                .unwrap()
                .expect("every writer opens the store and commits");
        }
        let store = RedisStore::open(&url, &quick()).unwrap();
        assert_eq!(store.counts().unwrap().documents, 4);
    }
}

/// SIGSTOP or SIGCONT to the server this test started.
fn signal(server: &RedisServer, name: &str) {
    let pid = server.pid().to_string();
    assert!(Command::new("kill")
        .args([name, pid.as_str()])
        .status()
        .unwrap()
        .success());
}

/// A new Redis holding a store `name` of the 20 documents [`doc`] makes, opened.
fn twenty_documents(name: &str) -> (RedisServer, RedisStore) {
    let server = RedisServer::start(&[]);
    let url = StoreUrl::parse(&server.url(name)).unwrap();
    let mut w = writer(&url, &quick());
    for i in 0..20 {
        w.add(doc(i)).unwrap();
    }
    w.commit(&mut |_, _| {}).unwrap();
    let store = RedisStore::open(&url, &quick()).unwrap();
    (server, store)
}

#[test]
fn a_frozen_redis_is_unavailable_within_one_timeout_for_every_request_and_recovers() {
    let (server, store) = twenty_documents("frozen");
    let store = std::sync::Arc::new(store);
    let before = bm25(&store, "topic3").unwrap();
    // A stopped process, not a dead one: connections are accepted by the kernel and never
    // answered. Four clients ask five times each.
    signal(&server, "-STOP");
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || {
                (0..5)
                    .map(|_| {
                        let started = Instant::now();
                        let result = bm25(&store, "topic3");
                        (started.elapsed(), result.map(drop))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for client in clients {
        for (took, result) in client.join().unwrap() {
            assert!(
                matches!(result, Err(Error::Unavailable { .. })),
                "{result:?}"
            );
            // One timeout (2 s) at most, never one per request queued before it.
            assert!(took < Duration::from_millis(2_500), "{took:?}");
        }
    }
    signal(&server, "-CONT");
    let resumed = Instant::now();
    let after = loop {
        match bm25(&store, "topic3") {
            Ok(hits) => break hits,
            Err(_) => {
                assert!(resumed.elapsed() < Duration::from_secs(10), "no recovery");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    assert_eq!(after, before);
    assert!(resumed.elapsed() < lector_redis::COOL_DOWN + Duration::from_secs(2));
}

#[test]
fn a_huge_question_is_scored_by_its_first_terms_within_the_timeout() {
    let (_server, store) = twenty_documents("huge");
    // 1 MiB of question: 1,024 terms "topic3 number" and then words that would change the
    // ranking if they were scored.
    let head = "topic3 number ".repeat(512);
    let huge = format!("{head}{}", "topic5 sentence ".repeat(70_000));
    assert!(huge.len() > 1 << 20);
    let started = Instant::now();
    let hits = bm25(&store, &huge).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(hits, bm25(&store, &head).unwrap());
    assert_ne!(hits, bm25(&store, "topic5 sentence").unwrap());
}

/// `field` of a Redis `INFO commandstats` line for `command` (e.g. `calls`).
fn command_stat(server: &RedisServer, command: &str, field: &str) -> u64 {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let mut c = client.get_connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .unwrap();
    let line = info
        .lines()
        .find(|l| l.starts_with(&format!("cmdstat_{command}:")));
    line.and_then(|l| {
        l.split([':', ','])
            .find_map(|kv| kv.strip_prefix(&format!("{field}=")))
    })
    .map_or(0, |v| v.parse().unwrap())
}

#[test]
fn a_commit_of_long_documents_goes_out_in_bounded_transactions() {
    // 300 documents of about 60 passages each: 256 of them were one transaction before, ~15,000
    // passages that Redis indexed while every other client waited, past the client's timeout.
    let server = RedisServer::start(&["--latency-monitor-threshold", "100"]);
    let url = StoreUrl::parse(&server.url("long")).unwrap();
    let mut w = writer(&url, &quick());
    let long = |i: usize| {
        let words: Vec<String> = (0..6_000)
            .map(|j| format!("w{}x{}", (i * 31 + j) % 997, j % 13))
            .collect();
        Document::new(format!("long-{i}"), words.join(" "))
    };
    for i in 0..300 {
        w.add(long(i)).unwrap();
    }
    let before = command_stat(&server, "exec", "calls");
    w.commit(&mut |_, _| {}).unwrap();
    let transactions = command_stat(&server, "exec", "calls") - before;
    let store = RedisStore::open(&url, &quick()).unwrap();
    let counts = store.counts().unwrap();
    assert_eq!(counts.documents, 300);
    let per = lector_redis::MAX_TRANSACTION_PASSAGES as u64;
    assert!(counts.passages > 15_000, "{counts:?}");
    assert!(
        transactions >= counts.passages as u64 / per,
        "{transactions} transactions for {} passages",
        counts.passages
    );
    // No command held Redis for long: Redis's latency monitor records every command (an EXEC
    // runs its transaction whole) slower than its threshold, 100 ms here.
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let mut c = client.get_connection().unwrap();
    let latest: Vec<(String, i64, i64, i64)> =
        redis::cmd("LATENCY").arg("LATEST").query(&mut c).unwrap();
    let slowest_ms = latest
        .iter()
        .filter(|(event, ..)| event == "command")
        .map(|&(_, _, _, max)| max)
        .max()
        .unwrap_or(0);
    println!("{transactions} transactions, slowest command {slowest_ms} ms");
    assert!(slowest_ms < 1_000, "a command held Redis {slowest_ms} ms");
    // Searched whole: every document's last passage is there.
    assert_eq!(
        store.passages("long-299").unwrap().len(),
        counts.passages / 300
    );
}

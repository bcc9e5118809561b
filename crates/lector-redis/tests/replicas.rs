//! A real Redis primary and a real read replica (`--replicaof`), both started by this test on
//! loopback ports and killed by their pids: lector writes to the primary and reads from the
//! replica, and a document written is found on the replica within a measured delay.

mod common;

use common::RedisServer;
use lector_index::{Document, DocumentStore, IndexSettings, Mode, SearchOptions, StoreWriter};
use lector_redis::{ConnectOptions, RedisStore, StoreUrl};
use std::time::{Duration, Instant};

#[test]
fn writes_to_the_primary_are_found_on_the_replica() {
    let primary = RedisServer::start(&[]);
    let port = primary.port.to_string();
    let replica = RedisServer::start(&["--replicaof", "127.0.0.1", &port]);
    let write_url = StoreUrl::parse(&primary.url("docs")).unwrap();
    let read_url = StoreUrl::parse(&replica.url("docs")).unwrap();
    let connect = ConnectOptions::default();
    let mut writer = common::bm25_writer(&write_url, &connect, IndexSettings::default()).unwrap();
    writer
        .add(Document::new(
            "first",
            "The replica copies the primary's writes.",
        ))
        .unwrap();
    writer.commit(&mut |_, _| {}).unwrap();

    // The store (its record, its search index and its passages) reaches the replica.
    let deadline = Instant::now() + Duration::from_secs(30);
    let store = loop {
        match RedisStore::open(&read_url, &connect) {
            Ok(store) if store.counts().is_ok_and(|c| c.documents == 1) => break store,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(err) => panic!("the replica never had the store: {err}"),
            Ok(_) => panic!("the replica never had the first document"),
        }
    };
    // A replica refuses writes: lector's writer must point at the primary.
    let err = common::bm25_writer(
        &StoreUrl::parse(&replica.url("other")).unwrap(),
        &connect,
        IndexSettings::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("read only replica"), "{err}");

    // Each new document: written and committed on the primary, then polled for on the replica.
    let options = SearchOptions::for_index(&store, Mode::Bm25);
    let mut delays = Vec::new();
    for i in 0..20 {
        let word = format!("marker{i}");
        let id = format!("doc-{i}");
        writer
            .add(Document::new(
                &id,
                format!("A passage that names {word} once."),
            ))
            .unwrap();
        writer.commit(&mut |_, _| {}).unwrap();
        let committed = Instant::now();
        loop {
            let hits = store
                .retriever(&options, None)
                .unwrap()
                .retrieve(&word, 1)
                .unwrap();
            if hits.first().is_some_and(|h| h.doc_id == id) {
                break;
            }
            assert!(
                committed.elapsed() < Duration::from_secs(5),
                "{id} not on the replica"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        delays.push(committed.elapsed());
    }
    delays.sort();
    eprintln!(
        "replica delay after commit over 20 documents: median {:?}, max {:?}",
        delays[10], delays[19]
    );
    assert_eq!(store.counts().unwrap().documents, 21);
    assert_eq!(store.generation().unwrap(), 21);
}

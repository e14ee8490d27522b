//! A TCP proxy that delays every byte by a fixed time each way: PostgreSQL "on another host"
//! for the benchmarks (`scripts/bench.py --only pgnet`), where `tc netem` is not available.
//!
//! ```sh
//! cargo run --release -p aether-store --example delay_proxy -- LISTEN TARGET DELAY_US
//! ```
//!
//! Each direction of each connection has a reader thread that stamps what it read and a writer
//! thread that sends it once its stamp is `DELAY_US` old, so the delay adds to every round trip
//! without limiting how much is in flight.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn pipe(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    });
    std::thread::spawn(move || {
        while let Ok((at, bytes)) = rx.recv() {
            let due = at + delay;
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if to.write_all(&bytes).is_err() {
                return;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Both);
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, target, delay] = &args[..] else {
        eprintln!("usage: delay_proxy LISTEN TARGET DELAY_US");
        std::process::exit(2);
    };
    let delay = Duration::from_micros(delay.parse().expect("DELAY_US is a number"));
    let listener = TcpListener::bind(listen).expect("listen");
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        let Ok(server) = TcpStream::connect(target) else {
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        pipe(
            client.try_clone().expect("clone"),
            server.try_clone().expect("clone"),
            delay,
        );
        pipe(server, client, delay);
    }
}

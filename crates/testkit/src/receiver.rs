//! A webhook receiver on 127.0.0.1 for notification tests: it records
//! every request (line, headers, body, when) and answers as scripted —
//! a status, or never (it holds the connection open until dropped).

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::received::{Received, read_request};

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Status(u16),
    /// Read the request, then never answer.
    Hang,
}

/// A loopback HTTP/1.1 receiver, stopped when dropped.
pub struct Receiver {
    pub port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    stop: Arc<AtomicBool>,
}

struct Script {
    first: Vec<Answer>,
    then: Answer,
}

impl Receiver {
    /// Answers every request 200.
    pub fn ok() -> Receiver {
        Receiver::scripted(Vec::new(), Answer::Status(200))
    }

    /// Answers `status` to the first `times` requests, then 200.
    pub fn failing(status: u16, times: usize) -> Receiver {
        Receiver::scripted(vec![Answer::Status(status); times], Answer::Status(200))
    }

    /// Never answers.
    pub fn hanging() -> Receiver {
        Receiver::scripted(Vec::new(), Answer::Hang)
    }

    /// Answers the requests in order with `first`, then all others `then`.
    pub fn scripted(first: Vec<Answer>, then: Answer) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("an address").port();
        listener.set_nonblocking(true).expect("non-blocking");
        let received = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let script = Arc::new(Mutex::new(Script { first, then }));
        let (log, stopped) = (received.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (log, stopped, script) = (log.clone(), stopped.clone(), script.clone());
                        std::thread::spawn(move || serve(stream, &log, &stopped, &script));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Receiver {
            port,
            received,
            stop,
        }
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }

    /// The requests once there are at least `count`; panics after
    /// [`crate::PATIENCE`].
    pub async fn wait_for(&self, count: usize) -> Vec<Received> {
        crate::eventually(
            &format!("{count} requests at port {}", self.port),
            || async {
                let requests = self.requests();
                (requests.len() >= count).then_some(requests)
            },
        )
        .await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Received>>, stop: &AtomicBool, script: &Mutex<Script>) {
    let mut reader = BufReader::new(stream);
    loop {
        let Some(received) = read_request(&mut reader) else {
            return;
        };
        log.lock().expect("lock").push(received);
        let answer = {
            let mut script = script.lock().expect("lock");
            match script.first.is_empty() {
                true => script.then,
                false => script.first.remove(0),
            }
        };
        match answer {
            Answer::Status(status) => {
                let response = format!("HTTP/1.1 {status} Scripted\r\nContent-Length: 0\r\n\r\n");
                if reader.get_mut().write_all(response.as_bytes()).is_err() {
                    return;
                }
                let _ = reader.get_mut().flush();
            }
            Answer::Hang => {
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                return;
            }
        }
    }
}

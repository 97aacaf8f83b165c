//! A TCP proxy that holds a run still at a point the test chooses: it forwards what clients send
//! to the server until a byte budget is spent, then forwards nothing more from any client
//! (answers still flow back). A run that must send more than the budget is then certain to be
//! mid-run, however fast the machine: no timing window decides where a kill lands.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the proxy's threads share.
#[derive(Default)]
struct Shared {
    /// Client bytes still to forward.
    budget: AtomicU64,
    /// A client read found the budget spent (and is being held).
    held: AtomicBool,
    /// The gate is dropped: held readers return and no connection is accepted.
    closed: AtomicBool,
    /// Every socket, to shut down when the gate closes.
    sockets: Mutex<Vec<TcpStream>>,
}

/// A running proxy to one server (see the module docs); dropping it closes every connection.
pub struct Gate {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Gate {
    /// Proxy to `server` (`http://HOST:PORT`), forwarding `budget` bytes of client requests.
    pub fn start(server: &str, budget: u64) -> Gate {
        let upstream: SocketAddr = server
            .trim_start_matches("http://")
            .parse()
            .unwrap_or_else(|e| panic!("{server} is not http://HOST:PORT: {e}"));
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the gate");
        let addr = listener.local_addr().expect("the gate's address");
        let shared = Arc::new(Shared {
            budget: AtomicU64::new(budget),
            ..Shared::default()
        });
        let accepting = Arc::clone(&shared);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.closed.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                // A server that is gone: the client sees its connection closed.
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                connect(&accepting, client, server);
            }
        });
        Gate { addr, shared }
    }

    /// The endpoint a client uses instead of the server's.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Wait until the budget is spent and a client is held there; `false` when `alive` turns
    /// false first (the client ended) or `limit` passes.
    pub fn wait_held(&self, limit: Duration, mut alive: impl FnMut() -> bool) -> bool {
        let started = Instant::now();
        while !self.shared.held.load(Ordering::SeqCst) {
            if !alive() || started.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        for socket in self.shared.sockets.lock().expect("sockets").drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
        // Wake the accepting thread so that it sees `closed` and returns.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Relay one connection: client to server within the budget, server to client freely.
fn connect(shared: &Arc<Shared>, client: TcpStream, server: TcpStream) {
    let (Ok(client_out), Ok(server_in)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    {
        let mut sockets = shared.sockets.lock().expect("sockets");
        for socket in [&client, &server] {
            if let Ok(s) = socket.try_clone() {
                sockets.push(s);
            }
        }
    }
    let upward = Arc::clone(shared);
    std::thread::spawn(move || forward_within_budget(&upward, client, server));
    std::thread::spawn(move || {
        let (mut from, mut to) = (server_in, client_out);
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Both);
    });
}

/// Forward `client`'s bytes to `server` while the budget lasts; then hold (read nothing more)
/// until the gate closes.
fn forward_within_budget(shared: &Shared, mut client: TcpStream, mut server: TcpStream) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let left = shared.budget.load(Ordering::SeqCst);
        if left == 0 {
            return hold(shared);
        }
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = match client.read(&mut buf[..want]) {
            Ok(0) | Err(_) => {
                let _ = server.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
        };
        // Several connections draw on one budget: take what is left, at most `n`.
        let taken = match shared
            .budget
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| {
                Some(b.saturating_sub(n as u64))
            }) {
            Ok(before) | Err(before) => before.min(n as u64) as usize,
        };
        if server.write_all(&buf[..taken]).is_err() {
            return;
        }
        if taken < n {
            // The rest of this read is past the budget: it is never sent.
            return hold(shared);
        }
    }
}

/// Hold a client past the budget: read nothing more from it until the gate closes.
fn hold(shared: &Shared) {
    shared.held.store(true, Ordering::SeqCst);
    while !shared.closed.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

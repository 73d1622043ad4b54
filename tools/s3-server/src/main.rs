//! The S3 server of cubeslab's tests and benchmarks: the s3s crate's protocol
//! (SigV4, ranged GET, multipart upload, listing) over s3s-fs's file-system
//! backend, like the `s3s-fs` binary, except that every connection has
//! TCP_NODELAY. Without it a response's body waits for the client's delayed
//! ACK of its headers: 40 ms stalls on one small GET in three, which no S3
//! service has and which would be measured as the client's time.
//!
//! Usage: cubeslab-s3-server --host H --port P --access-key K --secret-key S ROOT

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto::Builder,
};
use s3s::{auth::SimpleAuth, service::S3ServiceBuilder};
use s3s_fs::FileSystem;
use tokio::net::TcpListener;

struct Options {
    host: String,
    port: u16,
    access_key: String,
    secret_key: String,
    root: PathBuf,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let (mut host, mut port, mut access_key, mut secret_key, mut root) =
        ("127.0.0.1".to_string(), 8014u16, None, None, None);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--host" => host = value("--host")?,
            "--port" => {
                port = value("--port")?
                    .parse()
                    .map_err(|e| format!("--port: {e}"))?
            }
            "--access-key" => access_key = Some(value("--access-key")?),
            "--secret-key" => secret_key = Some(value("--secret-key")?),
            other if !other.starts_with('-') && root.is_none() => root = Some(other.into()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Options {
        host,
        port,
        access_key: access_key.ok_or("--access-key is required")?,
        secret_key: secret_key.ok_or("--secret-key is required")?,
        root: root.ok_or("the root folder is required")?,
    })
}

#[tokio::main]
async fn serve(options: Options) -> Result<(), String> {
    let backend = FileSystem::new(&options.root).map_err(|e| format!("{e:?}"))?;
    let mut service = S3ServiceBuilder::new(backend);
    service.set_auth(SimpleAuth::from_single(
        options.access_key,
        options.secret_key,
    ));
    let service = service.build();
    let listener = TcpListener::bind((options.host.as_str(), options.port))
        .await
        .map_err(|e| format!("{}:{}: {e}", options.host, options.port))?;
    let address: SocketAddr = listener.local_addr().map_err(|e| e.to_string())?;
    println!("listening on http://{address}");
    let http = Builder::new(TokioExecutor::new());
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((socket, _)) = accepted else { continue };
                let _ = socket.set_nodelay(true);
                let connection = http
                    .serve_connection(TokioIo::new(socket), service.clone())
                    .into_owned();
                tokio::spawn(connection);
            }
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

fn main() -> ExitCode {
    match parse(std::env::args().skip(1)).and_then(serve) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("cubeslab-s3-server: {message}");
            ExitCode::FAILURE
        }
    }
}

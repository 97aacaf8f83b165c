//! Conditional multipart completion. `object_store` puts a small object with `If-None-Match: *`
//! (`PutMode::Create`), but completes a multipart upload unconditionally; S3 (and SeaweedFS,
//! MinIO, R2) take the same header on `CompleteMultipartUpload` and then refuse to replace an
//! existing object. This connector adds it to every completion, after signing, exactly as
//! `object_store`'s own copy-if-not-exists path does, so no upload of this crate ever
//! overwrites an object, whatever its size.

use http::header::{HeaderValue, IF_NONE_MATCH};
use http::Method;
use object_store::client::{
    ClientOptions, HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService,
    ReqwestConnector,
};

/// Connects with `object_store`'s own HTTP client, wrapped in [`CreateOnlyCompletions`].
#[derive(Debug, Default)]
pub(crate) struct CreateOnlyConnector;

impl HttpConnector for CreateOnlyConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(CreateOnlyCompletions(inner)))
    }
}

/// Sends every request through the inner client, completions of multipart uploads with
/// `If-None-Match: *`.
#[derive(Debug)]
struct CreateOnlyCompletions(HttpClient);

#[async_trait::async_trait]
impl HttpService for CreateOnlyCompletions {
    async fn call(&self, mut request: HttpRequest) -> Result<HttpResponse, HttpError> {
        if completes_upload(request.method(), request.uri().query()) {
            request
                .headers_mut()
                .insert(IF_NONE_MATCH, HeaderValue::from_static("*"));
        }
        self.0.execute(request).await
    }
}

/// Whether a request is a `CompleteMultipartUpload`: a `POST` naming an `uploadId` (creating
/// an upload is a `POST ?uploads`, a part a `PUT`, an abort a `DELETE`).
fn completes_upload(method: &Method, query: Option<&str>) -> bool {
    *method == Method::POST
        && query.is_some_and(|q| q.split('&').any(|pair| pair.starts_with("uploadId=")))
}

#[cfg(test)]
mod tests {
    use http::Method;

    use super::completes_upload;

    #[test]
    fn only_completions_are_made_conditional() {
        assert!(completes_upload(&Method::POST, Some("uploadId=abc")));
        assert!(!completes_upload(&Method::POST, Some("uploads")));
        assert!(!completes_upload(
            &Method::PUT,
            Some("partNumber=1&uploadId=abc")
        ));
        assert!(!completes_upload(&Method::DELETE, Some("uploadId=abc")));
        assert!(!completes_upload(&Method::POST, None));
    }
}

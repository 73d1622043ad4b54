//! Text arrays (an axis's labels) of a store on object storage, fetched and
//! decoded whole, as `store::read_text` reads them from a folder.

use std::sync::Arc;

use zarrs::array::{Array, ArrayBytes, ArrayMetadata, ArraySubset};

use super::{
    client::{block_on, connect},
    contents::get_json,
    objects::StoreObjects,
    RemoteError, S3Url, StorageOptions,
};
use crate::{error::Result, store};

/// The text array at `url`: its shape and values (C order).
pub fn read_remote_text(url: &S3Url, options: &StorageOptions) -> Result<(Vec<u64>, Vec<String>)> {
    let client = connect(url, options)?;
    let metadata = get_json(&client, &url.join("zarr.json"), "read the labels")?;
    let failed = |message: String| RemoteError::Failed {
        url: url.to_string(),
        operation: "read the labels".into(),
        message,
    };
    if !store::is_text(&metadata) {
        return Err(RemoteError::Unsupported {
            url: url.to_string(),
            what: format!("reading data type {} as text", metadata["data_type"]),
        }
        .into());
    }
    let fixed = store::data_type_name(&metadata) == Some(store::FIXED_UTF32);
    let parsed: ArrayMetadata =
        serde_json::from_value(metadata).map_err(|e| failed(e.to_string()))?;
    let objects = Arc::new(StoreObjects::new(client, &url.key, 1 << 20, None));
    let array =
        Array::new_with_metadata(objects, "/", parsed).map_err(|e| failed(e.to_string()))?;
    let shape = array.shape().to_vec();
    let subset = ArraySubset::new_with_shape(shape.clone());
    let bytes = block_on(array.async_retrieve_array_subset::<ArrayBytes<'static>>(&subset))
        .map_err(|e| failed(e.to_string()))?;
    let values =
        store::labels(fixed, array.data_type(), bytes).map_err(|e| failed(e.to_string()))?;
    Ok((shape, values))
}
